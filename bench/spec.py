"""``python -m bench spec``: n-gram speculation on and off, side by side, on a workload whose
answers copy from the prompt and on one with nothing to copy.

On the trained demo model (it copies from its context; it cannot rewrite a file):

- ``copy``: paths and commands read back ("Repeat exactly: <three paths>", "Echo back:
  <three commands>");
- ``free``: a question about made-up words, nothing in the prompt to copy: the overhead.

Greedy, or ``--temperature`` with a fixed seed. The demo model is small enough that a token's
cost is mostly the server's Python, not the model run; ``python -m bench steps --verify 8``
gives the verify-cost curve of the 135M shape, to project the gain where the model run is
the cost (docs/speculation.md).

One server per arm (the same model and intra-op threads, ``GENAI_SCHEDULER=batch``), all
started at once; in each round every arm runs each level (a fixed number of requests in
flight) once, the arms in a new order, each request a fresh prompt. Reported per workload and
level: output tokens/s over the level, time per answer (median end-to-end), the server's CPU
seconds per output token (steadier than wall time on a shared machine), each arm's ratio to
the first arm (per round, then the median), and the drafted tokens' acceptance rate and
tokens per verify run (from the server's log). ``equality`` then sends the same greedy
prompts, one at a time, to the first two arms: the share of identical answers (on int4 a
multi-token run takes other kernels, so a near-tie can flip).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import statistics
from pathlib import Path
from typing import Any

from bench.loadgen import Client, RequestSpec, run_load

_ARMS_DEFAULT = {
    "off": {"GENAI_SPECULATIVE_TOKENS": "0"},
    "on": {"GENAI_SPECULATIVE_TOKENS": "8"},
}
_LINE = re.compile(r"drafted (\d+) tokens, accepted (\d+), in (\d+) verify runs")


WORKLOADS = ("copy", "free")


def ask(workload: str, seed: int) -> str:
    """A fresh request of ``workload``."""
    from bench.prompts import words
    from scripts.agent_corpus import CorpusRandom, command, path

    rng = CorpusRandom(seed, made_up=0.3, depth=7, prefixed=False)
    if workload == "free":
        return f"#{seed} Tell me about {words(12, seed)}."
    if seed % 2:
        return "Repeat exactly: " + " ".join(path(rng) for _ in range(3))
    return "Echo back: " + " && ".join(command(rng) for _ in range(3))


def counts(log: str) -> tuple[int, int, int]:
    """Tokens drafted, accepted and verify runs in a server log's speculation lines."""
    found = [tuple(int(g) for g in m.groups()) for m in _LINE.finditer(log)]
    return (sum(f[0] for f in found), sum(f[1] for f in found), sum(f[2] for f in found))


def run_spec(
    arms: dict[str, dict[str, str]] | None = None,
    sampling: dict[str, Any] | None = None,
    concurrency: tuple[int, ...] = (1, 4, 8),
    rounds: int = 6,
    requests: int = 8,
    max_tokens: int = 96,
    equality: int = 40,
    out: Path | None = None,
) -> str:
    from bench.models import DEMO
    from bench.server import ServerProcess, cpu_seconds, start_all

    arms = arms or _ARMS_DEFAULT
    env = {"GENAI_MODEL_DIR": str(DEMO), "GENAI_SCHEDULER": "batch"}
    servers = [ServerProcess(name, env | more, log_level="info") for name, more in arms.items()]
    healthy = start_all(servers)
    rng, seed, workloads = random.Random(0), 70_000, WORKLOADS
    samples: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    try:
        if len(healthy) != len(servers):
            raise RuntimeError("; ".join(f"{s.name}: {s.error}" for s in servers if s.error))
        clients = {
            (s.name, w): Client(s.url, protocol="openai", extra=dict(sampling or {}))
            for s in servers
            for w in workloads
        }
        for client in clients.values():
            asyncio.run(_probe(client))
        for _ in range(rounds):
            for workload in workloads:
                for level in concurrency:
                    order = list(servers)
                    rng.shuffle(order)
                    for server in order:
                        specs = []
                        for _ in range(max(requests, level)):
                            seed += 1
                            msgs = [{"role": "user", "content": ask(workload, seed)}]
                            specs.append(RequestSpec(msgs, max_tokens))
                        assert server.proc is not None
                        before, cpu = counts(server.output()), cpu_seconds(server.proc.pid)
                        summary = asyncio.run(
                            run_load(
                                clients[server.name, workload],
                                specs,
                                concurrency=level,
                                desc=f"{server.name} {workload} c{level}",
                            )
                        )
                        after = counts(server.output())
                        summary["server_cpu"] = cpu_seconds(server.proc.pid) - cpu
                        summary["speculation"] = [a - b for a, b in zip(after, before, strict=True)]
                        samples.setdefault((server.name, workload, level), []).append(summary)
        names = list(arms)[:2]
        same = _equality(clients, names, workloads, equality) if equality > 0 else None
    finally:
        for s in servers:
            s.stop()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        raw = {f"{k[0]} {k[1]} c{k[2]}": v for k, v in samples.items()}
        (out / "spec.json").write_text(json.dumps(raw, indent=1))
    table = render_table(samples, list(arms), workloads, concurrency)
    if same is not None:
        table += f"\nidentical answers, {' vs '.join(names)}: {same}\n"
    if out is not None:
        (out / "spec.md").write_text(table)
    return table


async def _probe(client: Client) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=60) as http:
        await client.probe(http)
    client.min_tokens = False  # answers end where the model ends them


def _equality(
    clients: dict[tuple[str, str], Client], names: list[str], workloads: tuple[str, ...], n: int
) -> str:
    """Answers to the same ``n`` prompts (the workloads in turn), one at a time, greedy and
    then seeded (temperature 0.7, seed 1)."""
    import httpx

    async def answers(client: Client, extra: dict[str, Any]) -> list[str]:
        again = Client(client.url, protocol="openai", model=client.model, extra=extra)
        out = []
        async with httpx.AsyncClient(timeout=600) as http:
            for i in range(n):
                msgs = [{"role": "user", "content": ask(workloads[i % len(workloads)], 90_000 + i)}]
                res = await again.request(http, RequestSpec(msgs, 96), stream=False)
                out.append(res.text)
        return out

    found = []
    for label, extra in (("greedy", {}), ("seeded", {"temperature": 0.7, "seed": 1})):
        a, b = (asyncio.run(answers(clients[name, workloads[0]], extra)) for name in names)
        found.append(f"{label} {sum(x == y for x, y in zip(a, b, strict=True))} of {n}")
    return ", ".join(found)


def render_table(
    samples: dict[tuple[str, str, int], list[dict[str, Any]]],
    names: list[str],
    workloads: tuple[str, ...],
    levels: tuple[int, ...],
) -> str:
    """Medians over rounds; ratios against the first arm, per round then the median."""
    lines = [
        "| workload | in flight | arm | tokens/s | ÷ first | time per answer | ÷ first | "
        "server CPU ms per token | ÷ first | accepted / drafted | tokens per verify run | "
        "model-bound × |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cpu(r: dict[str, Any]) -> float:
        return float(r["server_cpu"]) / max(1, r["output_tokens"]["total"])

    for workload in workloads:
        for level in levels:
            base = samples.get((names[0], workload, level), [])
            for name in names:
                runs = samples.get((name, workload, level), [])
                if not runs:
                    continue
                pairs = list(zip(runs, base, strict=False))
                tps = [r["output_token_throughput"] for r in runs]
                tps_x = [
                    a["output_token_throughput"] / b["output_token_throughput"] for a, b in pairs
                ]
                e2e = [r["e2e"]["p50"] for r in runs]
                e2e_x = [a["e2e"]["p50"] / b["e2e"]["p50"] for a, b in pairs]
                cpu_x = [cpu(a) / cpu(b) for a, b in pairs]
                drafted, accepted, runs_ = (
                    sum(r["speculation"][i] for r in runs) for i in range(3)
                )
                rate = f"{accepted / drafted:.2f} ({accepted}/{drafted})" if drafted else "—"
                per = f"{1 + accepted / runs_:.2f}" if runs_ else "—"
                bound = _model_bound(runs, drafted, accepted, runs_) if level == 1 else "—"
                med = statistics.median
                lines.append(
                    f"| {workload} | {level} | {name} | {med(tps):.0f} | {med(tps_x):.2f} | "
                    f"{med(e2e) * 1e3:.0f} ms | {med(e2e_x):.2f} | "
                    f"{med(cpu(r) for r in runs) * 1e3:.2f} | {med(cpu_x):.2f} | {rate} | {per} | "
                    f"{bound} |"
                )
    lines.append(
        "\nmodel-bound ×: one in flight, the decode speed-up where the model run is a token's "
        "whole cost: decoded tokens ÷ (plain steps + verify runs × c(mean k)), c(k) = 1 + "
        "k × VERIFY_COST (backends/engine/batch/speculation.py, measured on the 135M shape)."
    )
    return "\n".join(lines) + "\n"


def _model_bound(runs: list[dict[str, Any]], drafted: int, accepted: int, verifies: int) -> str:
    from backends.engine.batch.speculation import VERIFY_COST

    decoded = sum(r["output_tokens"]["total"] - r["ok"] for r in runs)  # first: the prefill's
    if not verifies or decoded <= 0:
        return "1.00"
    plain = decoded - accepted - verifies
    cost = plain + verifies * (1 + VERIFY_COST * drafted / verifies)
    return f"{decoded / cost:.2f}"
