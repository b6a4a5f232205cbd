"""``python -m bench spec``: n-gram speculation side by side with it off, onnxruntime-genai's
own n-gram and llama-server's, on the same weights and the same requests.

Arms (``--arm``, or :func:`default_arms`):

- ours, ``GENAI_SCHEDULER=batch``, speculation off and on (``GENAI_SPECULATIVE_TOKENS``);
- og's n-gram: ``GENAI_SCHEDULER=generator`` with it on (onnxruntime-genai's
  ``set_speculative_options``, batch size 1) and off, at one request in flight only;
- llama-server (``--llama-server``: a built binary) on the demo model's own weights as a GGUF
  (:mod:`bench.peers.onnx_gguf`, Q4_0 as the int4 model), ``--spec-type`` none, ``ngram-simple``,
  ``ngram-simple`` with ours' lookup (3-token n-grams, 8-token drafts) and ``ngram-mod``, with
  ``--parallel`` slots for the most requests in flight, fed the very token ids our server
  renders (``/v1/completions`` with the prompt as ids);
- an arm on another arm's server (``NAME:ARM+JSON``), sent those request fields, e.g.
  ``off:on+{"speculative": {"num_speculative_tokens": 0}}``: the two differ in nothing but
  the request, in one process (two servers of the same settings differ by up to 10% on these
  2 cores). Such a server keeps no KV cache of one arm's prompt for another's (``UNCACHED``).

Workloads (:mod:`bench.benchmarks.spec_workloads`): ``edit``, ``diff``, ``free``, ``copy``;
conditions greedy and ``seeded`` (temperature 0.7, seed 1, no other cut); levels: requests in
flight.

Every round runs each (workload, condition, level) for every arm, the arms in a new order
(or, with ``--together``, all at once: on a machine shared with other jobs they then see the
same load from outside, which one after the other they do not), each arm the same fresh
prompts; answers end where the model ends them (at most
``--max-tokens``). Reported per arm, as the median over rounds: decode tokens/s per request
(its tokens after the first ÷ the time after its first), time per answer (end to end), their
ratios to the first arm (per round, then the median, with the rounds' range and, from 6
rounds, the median's 95% confidence interval), the server's CPU time per token (the
process), the engine's (its owner thread's, ``genai_engine_cpu_seconds_total``: with
``--threads 1``, the model's whole work), the drafted tokens' acceptance and the mean
accepted length (1 + accepted ÷ verify runs: tokens per verify run), read off each server's
/metrics, and the mean copied fraction of the answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.benchmarks.spec_table import render_table
from bench.benchmarks.spec_workloads import WORKLOADS, ask, copied_fraction
from bench.harness.clients import RequestResult, RequestSpec, make_client

CONDITIONS: dict[str, dict[str, Any]] = {
    "greedy": {"temperature": 0.0},
    "seeded": {"temperature": 0.7, "seed": 1, "top_p": 1.0, "top_k": 0},
}
# llama-server's own cuts, off (min_p is on by default there).
LLAMA_SAMPLING = {"min_p": 0.0, "repeat_penalty": 1.0}
# /metrics series: drafted tokens, accepted tokens, verify runs.
OURS_COUNTERS = (
    "genai_speculative_draft_tokens_total",
    "genai_speculative_accepted_tokens_total",
    "genai_speculative_verify_runs_total",
)
# A server that several arms share keeps no prompt's KV cache for another arm's same prompt.
UNCACHED = {"GENAI_CACHE_SEQUENCES": "0", "GENAI_PREFIX_SHARE_MIN": "0"}
# /metrics series: our owner thread's CPU seconds in steps (the model's work with one
# intra-op thread).
ENGINE_CPU = "genai_engine_cpu_seconds_total"
LLAMA_COUNTERS = (
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
    "llamacpp:spec_decode_num_drafts_total",
)


@dataclass
class Arm:
    """One server: ours with ``env`` (server settings), or llama-server with ``args``; or,
    with ``via``, the server of the arm so named, sent ``body`` in every request (its fields
    over the condition's); ``levels``: the requests in flight it runs (None: every level)."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    llama_args: list[str] | None = None
    levels: tuple[int, ...] | None = None
    via: str | None = None
    body: dict[str, Any] = field(default_factory=dict)

    def runs(self, level: int) -> bool:
        return self.levels is None or level in self.levels

    @property
    def server(self) -> str:
        """The name of the arm whose server it runs on."""
        return self.via or self.name


def default_arms(llama: bool) -> list[Arm]:
    generator = {"GENAI_SCHEDULER": "generator"}
    arms = [
        Arm("off", {"GENAI_SPECULATIVE_TOKENS": "0"}),
        Arm("on", {"GENAI_SPECULATIVE_TOKENS": "8"}),
        Arm("og off", generator | {"GENAI_SPECULATIVE_TOKENS": "0"}, levels=(1,)),
        Arm("og n-gram", generator | {"GENAI_SPECULATIVE_TOKENS": "8"}, levels=(1,)),
    ]
    if llama:
        arms += [
            Arm("llama none", llama_args=[]),
            Arm("llama ngram-simple", llama_args=["--spec-type", "ngram-simple"]),
            Arm(
                "llama ngram-simple n3 m8",
                llama_args=["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3"]
                + ["--spec-ngram-simple-size-m", "8"],
            ),
            Arm("llama ngram-mod", llama_args=["--spec-type", "ngram-mod"]),
        ]
    return arms


def parse_arm(text: str) -> Arm:
    """``NAME:A=1,B=2`` (ours, server settings), ``NAME:llama:ARGS`` (llama-server's args) or
    ``NAME:ARM+JSON`` (arm ARM's server, these request fields), each with ``@1,2`` at the end
    for the levels it runs."""
    head, _, at = text.rpartition("@")
    if re.fullmatch(r"[0-9,]+", at):
        text = head
    else:
        at = ""
    name, _, rest = text.partition(":")
    levels = tuple(int(x) for x in at.split(",")) if at else None
    via, plus, body = rest.partition("+")
    if plus and "=" not in via and not via.startswith("llama"):
        fields = json.loads(body)
        if not isinstance(fields, dict):
            raise ValueError(f"arm {name!r}: request fields must be a JSON object")
        return Arm(name, levels=levels, via=via, body=fields)
    if rest.startswith("llama"):
        return Arm(name, llama_args=rest.removeprefix("llama").strip(":").split(), levels=levels)
    env = dict(item.split("=", 1) for item in rest.split(",") if item)
    return Arm(name, env, levels=levels)


def counters(text: str, names: tuple[str, ...]) -> tuple[int, int, int]:
    """Drafted tokens, accepted tokens and verify runs in a /metrics text (summed over
    labels; 0 where a series is absent)."""
    drafted, accepted, runs = (int(series(text, name)) for name in names)
    return drafted, accepted, runs


def series(text: str, name: str) -> float:
    """A /metrics text's series ``name``, summed over labels (0 where it is absent)."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.e+-]+)$", re.M)
    return sum(float(v) for v in pattern.findall(text))


def decode_rate(r: RequestResult) -> float | None:
    """A request's decode tokens/s as its server timed it (its tokens after the first ÷ the
    time after its first: ours' ``metrics.tokens_per_second``, llama-server's
    ``timings.predicted_per_second``): a client reads a fast server's stream in bursts."""
    rate = (r.server or {}).get("tokens_per_second")
    if r.output_tokens < 2 or not rate or rate != rate:
        return None
    return float(rate)


def run_spec(
    arms: list[Arm],
    workloads: tuple[str, ...] = WORKLOADS,
    conditions: tuple[str, ...] = tuple(CONDITIONS),
    levels: tuple[int, ...] = (1, 2, 4),
    rounds: int = 3,
    requests: int = 8,
    max_tokens: int = 160,
    equality: int = 0,
    llama_server: Path | None = None,
    out: Path | None = None,
    threads: int | None = None,
    together: bool = False,
    model: Path | None = None,
) -> str:
    from bench.harness.paths import DEMO
    from bench.harness.server import ServerProcess, start_all

    folder = model or DEMO
    _check_vias(arms, together)

    servers: dict[str, Any] = {}
    for arm in arms:
        if arm.via is not None:
            continue
        if arm.llama_args is None:
            env = {"GENAI_MODEL_DIR": str(folder), "GENAI_SCHEDULER": "batch"} | arm.env
            if any(a.via == arm.name for a in arms):  # the arms' prompts are the same
                env = UNCACHED | env
            if threads:
                env["GENAI_INTRA_OP_THREADS"] = str(threads)
            servers[arm.name] = ServerProcess(arm.name, env, log_level="info")
        else:
            servers[arm.name] = _llama(arm, llama_server, max(levels), threads, folder)
    started = start_all(list(servers.values()))
    samples: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    same = ""
    try:
        if len(started) != len(servers):
            failed = [f"{n}: {s.error}" for n, s in servers.items() if s not in started]
            raise RuntimeError("; ".join(failed))
        render = next(s.url for n, s in servers.items() if _arm(arms, n).llama_args is None)
        rng, seed = random.Random(0), 70_000
        for condition in conditions:  # warm every server up
            for arm in arms:
                warm = _level(servers[arm.server], arm, condition, [ask("copy", 1)], render, 1, 8)
                asyncio.run(warm)

        async def level_of(arms_now: list[Arm], condition: str, asks: Any, level: int) -> Any:
            runs = [
                _level(servers[a.server], a, condition, asks, render, level, max_tokens)
                for a in arms_now
            ]
            if together:  # every arm at once: they see the same load from outside
                return await asyncio.gather(*runs)
            return [await run for run in runs]

        for _ in range(rounds):
            for workload, condition, level in itertools.product(workloads, conditions, levels):
                asks = [ask(workload, seed + i) for i in range(max(requests, level))]
                seed += len(asks)
                order = [a for a in arms if a.runs(level)]
                rng.shuffle(order)
                found = asyncio.run(level_of(order, condition, asks, level))
                for arm, got in zip(order, found, strict=True):
                    samples.setdefault((arm.name, workload, condition, level), []).append(got)
        if equality:
            same = _equality(servers, arms, equality, max_tokens, render)
    finally:
        for server in servers.values():
            server.stop()
    table = render_table(samples, [a.name for a in arms], workloads, conditions, levels)
    if same:
        table += f"\nidentical answers: {same}\n"
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        raw = {" ".join(map(str, k)): v for k, v in samples.items()}
        (out / "spec.json").write_text(json.dumps(raw, indent=1))
        (out / "spec.md").write_text(table)
    return table


def _arm(arms: list[Arm], name: str) -> Arm:
    return next(a for a in arms if a.name == name)


def _check_vias(arms: list[Arm], together: bool) -> None:
    """An arm on another's server names one of ours, and takes its turn: run at the same
    time, the two would share one engine and one set of counters."""
    own = {a.name for a in arms if a.via is None and a.llama_args is None}
    for arm in arms:
        if arm.via is not None and arm.via not in own:
            raise ValueError(f"arm {arm.name!r} runs on {arm.via!r}, which is not our server's arm")
        if arm.via is not None and together:
            raise ValueError(f"arm {arm.name!r} shares a server: it cannot run --together")


def _llama(arm: Arm, binary: Path | None, slots: int, threads: int | None, folder: Path) -> Any:
    from bench.peers.llama_server import LlamaServer

    if binary is None:
        raise RuntimeError(f"arm {arm.name!r} needs --llama-server PATH (a built llama-server)")
    return LlamaServer(
        arm.name,
        {},
        binary=binary,
        gguf=model_gguf(folder, binary.parent / "llama-quantize"),
        threads=threads or len(os.sched_getaffinity(0)),
        parallel=slots,
        extra_args=[*(arm.llama_args or []), "--metrics"],
    )


def model_gguf(folder: Path, quantize: Path) -> Path:
    """A model folder's weights as a Q4_0 GGUF, made once under bench/.cache/ (named by the
    folder and its weights' size and time, so another folder or a rebuild makes its own)."""
    from bench.harness.paths import CACHE
    from bench.peers.llama_server import quantize_q4_0
    from bench.peers.onnx_gguf import write_gguf

    weights = max(folder.glob("*.onnx*"), key=lambda p: p.stat().st_size).stat()
    stamp = hashlib.sha256(
        f"{folder.resolve()}:{weights.st_size}:{weights.st_mtime_ns}".encode()
    ).hexdigest()[:10]
    q4 = CACHE / "gguf" / f"{folder.name}-{stamp}-q4_0.gguf"
    if not q4.exists():
        q4.parent.mkdir(parents=True, exist_ok=True)
        f32 = write_gguf(folder, q4.with_name(f"{folder.name}-f32.gguf"))
        quantize_q4_0(quantize, f32, q4, 1)
    return q4


async def _level(
    server: Any,
    arm: Arm,
    condition: str,
    asks: list[list[dict[str, str]]],
    render: str,
    level: int,
    max_tokens: int,
) -> dict[str, Any]:
    """Send ``asks`` with ``level`` in flight; what they gave."""
    import httpx

    from bench.harness.server import cpu_seconds

    llama = arm.llama_args is not None
    sampling = CONDITIONS[condition] | (LLAMA_SAMPLING if llama else {}) | arm.body
    client = make_client(server.url, protocol="completions" if llama else "openai", extra=sampling)
    names = LLAMA_COUNTERS if llama else OURS_COUNTERS
    async with httpx.AsyncClient(timeout=600) as http:
        specs = []
        for messages in asks:
            ids = None
            if llama:  # exactly the token ids our server feeds its model
                r = await http.post(
                    render + "/v1/chat/completions/render", json={"messages": messages}
                )
                ids = r.json()["token_ids"]
            specs.append(RequestSpec(messages, max_tokens, prompt_ids=ids))
        page = (await http.get(server.url + "/metrics")).text
        before, engine = counters(page, names), series(page, ENGINE_CPU)
        load, cpu = os.getloadavg()[0], cpu_seconds(server.proc.pid)
        queue = list(specs)
        results: list[tuple[RequestSpec, RequestResult]] = []

        async def worker() -> None:
            while queue:
                spec = queue.pop(0)
                results.append((spec, await client.request(http, spec, stream=True)))

        await asyncio.gather(*(worker() for _ in range(level)))
        cpu = cpu_seconds(server.proc.pid) - cpu
        page = (await http.get(server.url + "/metrics")).text
        after, engine = counters(page, names), series(page, ENGINE_CPU) - engine
    ok = [(s, r) for s, r in results if r.ok]
    if len(ok) < len(results):
        errors = {r.error for _, r in results if not r.ok}
        raise RuntimeError(f"{arm.name}: {len(results) - len(ok)} requests failed: {errors}")
    return {
        "decode": [d for _, r in ok if (d := decode_rate(r)) is not None],
        "e2e": [r.e2e for _, r in ok],
        "tokens": [r.output_tokens for _, r in ok],
        "copied": [copied_fraction(_text(s.messages), r.text) for s, r in ok],
        "speculation": [a - b for a, b in zip(after, before, strict=True)],
        "cpu_per_token": cpu / max(1, sum(r.output_tokens for _, r in ok)),
        "engine_cpu_per_token": engine / max(1, sum(r.output_tokens for _, r in ok)),
        "load": load,
    }  # fmt: skip


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def _equality(
    servers: dict[str, Any], arms: list[Arm], n: int, max_tokens: int, render: str
) -> str:
    """The greedy and seeded answers of the first two arms to the same ``n`` prompts (every
    workload in turn), one at a time."""
    first, second = arms[0], arms[1]
    found = []
    for condition in CONDITIONS:
        asks = [ask(WORKLOADS[i % len(WORKLOADS)], 90_000 + i) for i in range(n)]
        texts = []
        for arm in (first, second):
            got = asyncio.run(_answers(servers[arm.server], condition, asks, max_tokens, arm.body))
            texts.append(got)
        same = sum(a == b for a, b in zip(*texts, strict=True))
        found.append(f"{condition} {same} of {n} ({first.name} vs {second.name})")
    return ", ".join(found)


async def _answers(
    server: Any, condition: str, asks: list[Any], max_tokens: int, body: dict[str, Any]
) -> list[str]:
    import httpx

    client = make_client(server.url, protocol="openai", extra=CONDITIONS[condition] | body)
    async with httpx.AsyncClient(timeout=600) as http:
        return [
            (await client.request(http, RequestSpec(m, max_tokens), stream=False)).text
            for m in asks
        ]
