"""``python -m bench steps --server``: where the server's decode steps go while ``rows``
streams decode together, per operator, and the time between its runs.

Starts the server on the benchmark model with its admin routes and sends ``rows`` long
streaming requests at once; once every one has its first token, opens onnxruntime's profiling
window (``POST /admin/profiling``: the batch scheduler swaps in a profiling session for the
next model steps), and cancels the streams once it is taken. From the profile
it keeps the runs that fed one token to each of ``rows`` rows (the embedding kernel's input
shape says how many; the newcomers' prefills are left out) and gives their operators by group
(bench/probes/prefill_profile.py's groups: the int4 matmuls by role, GroupQueryAttention,
the rest) and the gap from the end of one such run to the start of the next when they follow
each other: time the server spends outside onnxruntime between two decode steps (sampling,
streaming, scheduling; Python).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import httpx

from bench.harness.prompts import words
from bench.harness.server import ServerProcess
from bench.probes.prefill_profile import group

ADMIN_KEY = "bench-admin"
LONG = 1024  # tokens a stream asks for (cancelled once the profile is taken); fits a 2k slot


def decode_runs(events: list[dict[str, Any]], rows: int) -> list[dict[str, Any]]:
    """The profile's model runs that fed one token to each of ``rows`` rows, each with its
    kernels' milliseconds by group and the gap since the run before when that one was such a
    run too (None otherwise)."""
    runs = sorted(
        (e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"),
        key=lambda e: e["ts"],
    )
    kernels = sorted(
        (e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")),
        key=lambda e: e["ts"],
    )
    out: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    k = 0
    for run in runs:
        lo, hi = run["ts"], run["ts"] + run["dur"]
        ms: dict[str, float] = {}
        fed: list[int] | None = None
        while k < len(kernels) and kernels[k]["ts"] < lo:
            k += 1
        j = k
        while j < len(kernels) and kernels[j]["ts"] <= hi:
            e = kernels[j]
            name = group(e["args"]["op_name"], e["name"])
            ms[name] = ms.get(name, 0.0) + e["dur"] / 1e3
            if name == "embedding lookup" and fed is None:
                shapes = e["args"].get("input_type_shape", [])
                fed = next((list(v) for s in shapes[1:2] for v in s.values()), None)
            j += 1
        is_decode = fed == [rows, 1]
        if is_decode:
            ms["outside kernels"] = run["dur"] / 1e3 - sum(ms.values())
            ms["total (model_run)"] = run["dur"] / 1e3
            gap = (lo - (previous["ts"] + previous["dur"])) / 1e3 if previous else None
            out.append({"ms": ms, "gap_ms": gap})
        previous = run if is_decode else None
    return out


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    names = sorted({k for r in runs for k in r["ms"]})
    gaps = [r["gap_ms"] for r in runs if r["gap_ms"] is not None]
    return {
        "runs": len(runs),
        "ms": {k: statistics.median(r["ms"].get(k, 0.0) for r in runs) for k in names},
        "gap_ms": {
            "median": statistics.median(gaps) if gaps else float("nan"),
            "p90": sorted(gaps)[int(0.9 * (len(gaps) - 1))] if gaps else float("nan"),
            "n": len(gaps),
        },
    }


async def _stream(
    http: httpx.AsyncClient, url: str, prompt: str, chunks: list[int], i: int
) -> None:
    """One long streaming request, counting its chunks into ``chunks[i]`` until cancelled."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": LONG,
        "min_tokens": LONG,
        "temperature": 0,
        "stream": True,
    }
    async with http.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("data:") and '"content"' in line:
                chunks[i] += 1


async def _profiled(url: str, rows: int, steps: int) -> None:
    """Start ``rows`` streams; once each has its first token, profile the next ``steps``
    model steps; once the first stream has had ``steps`` more tokens, stop and cancel all."""
    auth = {"Authorization": f"Bearer {ADMIN_KEY}"}  # an admin key does all a user key does
    async with httpx.AsyncClient(timeout=600, headers=auth) as http:
        chunks = [0] * rows
        tasks = [
            asyncio.create_task(_stream(http, url, words(96, 500 + i), chunks, i))
            for i in range(rows)
        ]
        try:
            while min(chunks) == 0:
                await _alive(tasks)
            r = await http.post(url + "/admin/profiling", json={"enabled": True, "steps": steps})
            r.raise_for_status()
            start = chunks[0]
            while chunks[0] < start + steps:
                await _alive(tasks)
            r = await http.post(url + "/admin/profiling", json={"enabled": False})
            r.raise_for_status()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _alive(tasks: list[asyncio.Task[None]]) -> None:
    await asyncio.sleep(0.05)
    for task in tasks:
        if task.done() and task.exception() is not None:
            raise RuntimeError(f"a stream failed: {task.exception()}")


def profile(
    model: Path, rows: int, threads: int, env: dict[str, str], steps: int = 40
) -> dict[str, Any]:
    """Profile ``steps`` of the server's steps once ``rows`` streams decode together."""
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            "profiled",
            {
                "GENAI_MODEL_DIR": str(model),
                "GENAI_INTRA_OP_THREADS": str(threads),
                "GENAI_ADMIN_API_KEY": ADMIN_KEY,
                "GENAI_PROFILE_DIR": tmp,
                # plain decode steps: a verify run feeds one row several tokens, and with
                # the overlapped prefill a decode run may go to its second session
                "GENAI_SPECULATIVE_TOKENS": "0",
                "GENAI_PREFILL_OVERLAP": "0",
                **env,
            },
        )
        server.start()
        try:
            if not server.wait_ready():
                raise RuntimeError(f"the server did not start: {server.error}")
            asyncio.run(_profiled(server.url, rows, steps))
        finally:
            server.stop()
        files = sorted(Path(tmp).glob("*.json"), key=lambda p: p.stat().st_mtime)
        if not files:
            raise RuntimeError("the server wrote no profile")
        events = [e for f in files for e in json.loads(f.read_text())]
    runs = decode_runs(events, rows)
    if not runs:
        model_runs = sum(e.get("name") == "model_run" for e in events)
        raise RuntimeError(
            f"no run fed one token to each of {rows} rows ({model_runs} model runs in "
            f"{len(files)} profile files)"
        )
    return {"model": model.name, "rows": rows, "threads": threads, "env": env, **summary(runs)}


def table(result: dict[str, Any]) -> str:
    ms = result["ms"]
    total = ms["total (model_run)"]
    lines = ["| operator | ms per step | share |", "|---|---|---|"]
    for name in sorted((k for k in ms if k != "total (model_run)"), key=lambda k: -ms[k]):
        lines.append(f"| {name} | {ms[name]:.1f} | {ms[name] / total:.0%} |")
    gap = result["gap_ms"]
    lines += [
        f"| total (model_run) | {total:.1f} | 100% |",
        f"| between two decode runs (outside onnxruntime) | {gap['median']:.1f} "
        f"(p90 {gap['p90']:.1f}) | {gap['median'] / total:.0%} of a run |",
        "",
        f"The server ({result['model']}, {result['threads']} intra-op threads) decoding "
        f"{result['rows']} streams: medians over {result['runs']} runs that fed one token to "
        f"each of {result['rows']} rows ({gap['n']} gaps between consecutive ones); "
        "onnxruntime's profiler, its own overhead included.",
    ]
    return "\n".join(lines) + "\n"
