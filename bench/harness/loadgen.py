"""The project's own async load generator (httpx), for this server or any OpenAI-compatible one.

Two arrival patterns: a fixed number of requests in flight (closed loop) and Poisson arrivals
at a given rate (open loop), through one protocol's client (bench/harness/clients/). The summary
gives throughput, goodput under an SLO, and percentiles of TTFT, time per output token,
inter-token latency and end-to-end latency. The client measures its own CPU time too: on a
2-core machine it competes with the server it measures.
"""

from __future__ import annotations

import asyncio
import random
import resource
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.harness.clients import Client, RequestResult, RequestSpec

try:
    from tqdm import tqdm
except ImportError:  # the smoke mode needs only httpx
    tqdm = None


def percentiles(values: list[float], ps: tuple[int, ...] = (50, 90, 99)) -> dict[str, float]:
    if not values:
        return {f"p{p}": float("nan") for p in ps} | {"mean": float("nan")}
    s = sorted(values)
    out = {}
    for p in ps:  # linear interpolation between closest ranks
        k = (len(s) - 1) * p / 100
        lo = int(k)
        hi = min(lo + 1, len(s) - 1)
        out[f"p{p}"] = s[lo] + (s[hi] - s[lo]) * (k - lo)
    out["mean"] = sum(s) / len(s)
    return out


@dataclass(frozen=True)
class SLO:
    ttft: float = 1.0  # seconds
    tpot: float = 0.1  # seconds per output token after the first

    def met(self, r: RequestResult) -> bool:
        return r.ok and r.ttft <= self.ttft and r.tpot <= self.tpot


def summarize(results: list[RequestResult], wall: float, cpu: float, slo: SLO) -> dict[str, Any]:
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    return {
        "requests": len(results),
        "ok": len(ok),
        "errors": sorted({r.error or "" for r in results if not r.ok})[:3],
        "wall_s": wall,
        "request_throughput": len(ok) / wall if wall else 0.0,
        "output_token_throughput": out_tokens / wall if wall else 0.0,
        "goodput": sum(slo.met(r) for r in ok) / wall if wall else 0.0,
        "slo": {"ttft_s": slo.ttft, "tpot_s": slo.tpot},
        "output_tokens": {
            "total": out_tokens,
            "min": min((r.output_tokens for r in ok), default=0),
            "max": max((r.output_tokens for r in ok), default=0),
        },
        "prompt_tokens": max((r.prompt_tokens for r in ok), default=0),
        "ttft": percentiles([r.ttft for r in ok]),
        "tpot": percentiles([r.tpot for r in ok if r.output_tokens > 1]),
        "itl": percentiles([g for r in ok for g in r.itl]),
        "e2e": percentiles([r.e2e for r in ok]),
        "client_cpu_s": cpu,
        "client_cpu_share": cpu / wall if wall else 0.0,
    }


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def run_load(
    client: Client,
    specs: list[RequestSpec],
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    stream: bool = True,
    seed: int = 0,
    slo: SLO = SLO(),
    desc: str = "",
    progress: bool = True,
) -> dict[str, Any]:
    """Send ``specs`` with ``concurrency`` in flight, or as Poisson arrivals at ``rate``/s."""
    limits = httpx.Limits(max_connections=max(64, concurrency or 0))
    bar = tqdm(total=len(specs), desc=desc, leave=False) if (tqdm and progress) else None
    results: list[RequestResult] = []

    async def one(http: httpx.AsyncClient, spec: RequestSpec) -> None:
        results.append(await client.request(http, spec, stream=stream))
        if bar is not None:
            bar.update(1)

    async with httpx.AsyncClient(limits=limits, timeout=client.timeout) as http:
        cpu0, t0 = _cpu(), time.perf_counter()
        if rate is None:
            queue: asyncio.Queue[RequestSpec] = asyncio.Queue()
            for s in specs:
                queue.put_nowait(s)

            async def worker() -> None:
                while not queue.empty():
                    await one(http, queue.get_nowait())

            await asyncio.gather(*(worker() for _ in range(concurrency or 1)))
        else:
            rng = random.Random(seed)
            tasks = []
            for s in specs:
                tasks.append(asyncio.create_task(one(http, s)))
                await asyncio.sleep(rng.expovariate(rate))
            await asyncio.gather(*tasks)
        wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    if bar is not None:
        bar.close()
    summary = summarize(results, wall, cpu, slo)
    summary.update(concurrency=concurrency, rate=rate, stream=stream)
    return summary
