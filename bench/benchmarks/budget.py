"""``python -m bench budget``: the batch scheduler's step token budget (``GENAI_STEP_TOKENS``)
side by side: one server per value, the same load levels as ``python -m bench run`` (fresh
prompts of ``prompt_tokens`` tokens, ``new_tokens`` greedy tokens, a fixed number in flight),
rounds in which every arm runs each level once in a new order. Reports aggregate output
tokens/s and the inter-token latency median and p99 (and p99 ÷ median) per level, and each
arm's throughput ÷ the first value's (``0``: no budget, today's chunks of
``GENAI_PREFILL_CHUNK``), and output tokens per second of the server process's CPU time
(all its threads): on a machine other work shares, the figure its neighbours move least."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
from pathlib import Path
from typing import Any

from bench.harness.clients import Client, RequestSpec, make_client
from bench.harness.loadgen import run_load


def run_budget(
    arms: dict[str, dict[str, str]],
    concurrency: list[int],
    rounds: int = 2,
    requests: int = 16,
    prompt_tokens: int = 128,
    new_tokens: int = 64,
    shape: str = "smollm2-135m",
    out: Path | None = None,
    trees: dict[str, Path] | None = None,
) -> str:
    """``arms``: name -> server settings beside the model and ``GENAI_SCHEDULER=batch``; the
    first is the baseline. ``trees``: more arms, name -> another checkout of this server (an
    earlier commit, say) run with its own defaults, side by side with this one."""
    import onnxruntime_genai as og

    from bench.harness.model_cache import ensure_models
    from bench.harness.prompts import PromptMaker
    from bench.harness.server import ServerProcess, cpu_seconds, start_all

    model = ensure_models(shape)["int4"]
    prompts = PromptMaker(og.Tokenizer(og.Model(str(model))))
    env = {"GENAI_MODEL_DIR": str(model), "GENAI_SCHEDULER": "batch"}
    servers = [ServerProcess(name, env | more) for name, more in arms.items()]
    servers += [ServerProcess(name, env, cwd=tree) for name, tree in (trees or {}).items()]
    healthy = start_all(servers)
    rng, seed = random.Random(0), 50_000
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
    try:
        if len(healthy) != len(servers):
            raise RuntimeError("; ".join(f"{s.name}: {s.error}" for s in servers if s.error))
        clients = {s.name: make_client(s.url, protocol="openai") for s in servers}
        by_name = {s.name: s for s in servers}
        for client in clients.values():
            asyncio.run(_probe(client))
        for _ in range(rounds):
            for level in concurrency:
                order = list(clients)
                rng.shuffle(order)
                for name in order:
                    specs = []
                    for _ in range(max(requests, 2 * level)):
                        seed += 1
                        msgs, ids = prompts.exact(prompt_tokens, seed)
                        specs.append(RequestSpec(msgs, new_tokens, prompt_ids=ids))
                    pid = by_name[name].proc.pid  # type: ignore[union-attr]
                    used = cpu_seconds(pid)
                    summary = asyncio.run(
                        run_load(clients[name], specs, concurrency=level, desc=f"{name} c{level}")
                    )
                    summary["server_cpu_s"] = cpu_seconds(pid) - used
                    samples.setdefault((name, level), []).append(summary)
    finally:
        for s in servers:
            s.stop()
    table = _table(samples, [s.name for s in servers], concurrency)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "budget.json").write_text(
            json.dumps({f"{k[0]} c{k[1]}": v for k, v in samples.items()}, indent=2)
        )
        (out / "budget.md").write_text(table)
    return table


async def _probe(client: Client) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=60) as http:
        await client.probe(http)


def _table(
    samples: dict[tuple[str, int], list[dict[str, Any]]], names: list[str], levels: list[int]
) -> str:
    """Medians over rounds; throughput ratios against the first arm, per round then median."""
    lines = [
        "| arm | in flight | tokens/s | ÷ first arm | ITL p50 | ITL p99 | p99 ÷ p50 | TTFT p50 "
        "| tokens per CPU s | ÷ first arm |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for level in levels:
        base = samples.get((names[0], level), [])
        for name in names:
            runs = samples.get((name, level), [])
            if not runs:
                continue
            tps = [r["output_token_throughput"] for r in runs]
            p50 = [r["itl"]["p50"] for r in runs]
            p99 = [r["itl"]["p99"] for r in runs]
            ratio = [
                a["output_token_throughput"] / b["output_token_throughput"]
                for a, b in zip(runs, base, strict=False)
            ]
            per_cpu = [_per_cpu(r) for r in runs]
            cpu_ratio = [_per_cpu(a) / _per_cpu(b) for a, b in zip(runs, base, strict=False)]
            lines.append(
                f"| {name} | {level} | {statistics.median(tps):.1f} | "
                f"{statistics.median(ratio):.3f} | {statistics.median(p50) * 1e3:.0f} ms | "
                f"{statistics.median(p99) * 1e3:.0f} ms | "
                f"{statistics.median(b / a for a, b in zip(p50, p99, strict=True)):.2f} | "
                f"{statistics.median(r['ttft']['p50'] for r in runs) * 1e3:.0f} ms | "
                f"{statistics.median(per_cpu):.1f} | {statistics.median(cpu_ratio):.3f} |"
            )
    return "\n".join(lines) + "\n"


def _per_cpu(summary: dict[str, Any]) -> float:
    """Output tokens per CPU second of the server process (NaN where not measured)."""
    used = summary.get("server_cpu_s", float("nan"))
    tokens = summary["output_tokens"]["total"]
    return float(tokens / used) if used and used == used else float("nan")
