"""``python -m bench steps --server``: where the server's decode steps go while ``rows``
streams decode together, per operator, and the time between its runs.

Starts the server on the benchmark model with its admin routes, opens onnxruntime's
profiling window (``POST /admin/profiling``: the batch scheduler swaps in a profiling session
for the next model steps), then sends ``rows`` streaming requests at once. From the profile
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
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness.clients import RequestSpec, make_client
from bench.harness.prompts import words
from bench.harness.server import ServerProcess
from bench.probes.prefill_profile import group

ADMIN_KEY = "bench-admin"


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


async def _streams(url: str, rows: int, prompt_words: int, tokens: int) -> None:
    client = make_client(url, protocol="openai")
    # the admin key does all a user key does (with a key set, every route needs one)
    auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with httpx.AsyncClient(timeout=600, headers=auth) as http:
        await client.probe(http)
        specs = [
            RequestSpec([{"role": "user", "content": words(prompt_words, 500 + i)}], tokens)
            for i in range(rows)
        ]
        results = await asyncio.gather(*(client.request(http, s, stream=True) for s in specs))
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"requests failed: {failed[:2]}")


def profile(
    model: Path, rows: int, threads: int, env: dict[str, str], steps: int = 150, tokens: int = 96
) -> dict[str, Any]:
    """Profile the server's steps while ``rows`` streams of ``tokens`` tokens decode."""
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            "profiled",
            {
                "GENAI_MODEL_DIR": str(model),
                "GENAI_INTRA_OP_THREADS": str(threads),
                "GENAI_ADMIN_API_KEY": ADMIN_KEY,
                "GENAI_PROFILE_DIR": tmp,
                **env,
            },
        )
        server.start()
        try:
            if not server.wait_ready():
                raise RuntimeError(f"the server did not start: {server.error}")
            r = httpx.post(
                server.url + "/admin/profiling",
                json={"enabled": True, "steps": steps},
                headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                timeout=120,
            )
            r.raise_for_status()
            time.sleep(1.0)  # the profiling session is made before the first request
            asyncio.run(_streams(server.url, rows, 96, tokens))
            httpx.post(
                server.url + "/admin/profiling",
                json={"enabled": False},
                headers={"Authorization": f"Bearer {ADMIN_KEY}"},
                timeout=120,
            )
        finally:
            server.stop()
        files = sorted(Path(tmp).glob("*.json"), key=lambda p: p.stat().st_mtime)
        if not files:
            raise RuntimeError("the server wrote no profile")
        events = [e for f in files for e in json.loads(f.read_text())]
    runs = decode_runs(events, rows)
    if not runs:
        raise RuntimeError(f"no run fed one token to each of {rows} rows")
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
