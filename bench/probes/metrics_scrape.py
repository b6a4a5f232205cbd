"""How fast /metrics answers while the server generates, as the inference gateway's endpoint
picker scrapes it (every 50 ms; it counts data older than 200 ms as saturated):
``python -m bench.probes.metrics_scrape [--model DIR] [--in-flight 8] [--seconds 60]
[--scrapers 1]``.

A real server process (``main_genai.py``, GENAI_METRICS_OPEN, ``--threads`` intra-op threads)
generates for ``--in-flight`` streaming chat completions at all times (each replaced as it
ends; of half to 1.5 times ``--tokens`` tokens, so that they do not all end at once), while
``--scrapers`` clients each GET /metrics every ``--interval`` s. Reports the scrape latency's
percentiles, how many sequences the gauges saw running, and the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness.loadgen import percentiles
from bench.harness.machine import describe
from bench.harness.paths import ROOT
from bench.harness.server import ServerProcess

WORDS = "river mountain city road tree bird fish water fire stone cloud wind light".split()


def gauge(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


async def generate(client: httpx.AsyncClient, stop: float, tokens: int, seed: int) -> int:
    """Stream chat completions back to back until ``stop``; how many finished."""
    done = 0
    while time.monotonic() < stop:
        words = " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(40))
        body = {
            "messages": [{"role": "user", "content": f"{seed} {done}: {words}"}],
            "max_tokens": tokens,
            "min_tokens": tokens,
            "stream": True,
        }
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            async for _ in response.aiter_lines():
                pass
        done += 1
    return done


async def scrape(
    client: httpx.AsyncClient, stop: float, interval: float
) -> tuple[list[float], list[float]]:
    """GET /metrics every ``interval`` s until ``stop``: each latency, and the running gauge."""
    latencies, running = [], []
    while time.monotonic() < stop:
        started = time.perf_counter()
        response = await client.get("/metrics")
        latencies.append(time.perf_counter() - started)
        response.raise_for_status()
        seen = gauge(response.text, "vllm:num_requests_running")
        assert seen is not None, "no vllm:num_requests_running on /metrics"
        running.append(seen)
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))
    return latencies, running


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=args.in_flight + args.scrapers + 4)
    timeout = httpx.Timeout(600.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        warm = time.monotonic() + args.warmup
        stop = warm + args.seconds
        # Streams of different lengths (half to 1.5 times --tokens), so that they end, and new
        # ones arrive, at different times, as a server's traffic does, not all in one step.
        lengths = [
            args.tokens // 2 + args.tokens * i // args.in_flight for i in range(args.in_flight)
        ]
        load = [generate(client, stop, n, seed) for seed, n in enumerate(lengths)]
        loaders = asyncio.gather(*load)
        await asyncio.sleep(args.warmup)  # every sequence admitted and decoding
        scrapes = await asyncio.gather(
            *(scrape(client, stop, args.interval) for _ in range(args.scrapers))
        )
        finished = await loaders
    latencies = [x for lat, _ in scrapes for x in lat]
    running = [x for _, run in scrapes for x in run]
    ms = {k: round(v * 1000, 1) for k, v in percentiles(latencies, (50, 90, 99)).items()}
    return {
        "scrapes": len(latencies),
        "latency_ms": ms | {"max": round(max(latencies) * 1000, 1)},
        "over_200ms": sum(x > 0.2 for x in latencies),
        "running_seen": {"min": min(running), "max": max(running)},
        "completions_finished": sum(finished),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.metrics_scrape", description=__doc__)
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "demo-llama")
    ap.add_argument("--in-flight", type=int, default=8, help="streams generating at all times")
    ap.add_argument("--scrapers", type=int, default=1, help="clients scraping /metrics")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between scrapes")
    ap.add_argument("--seconds", type=float, default=60.0, help="measured time")
    ap.add_argument("--warmup", type=float, default=5.0, help="load before measuring, seconds")
    ap.add_argument("--tokens", type=int, default=256, help="tokens a stream generates, on average")
    ap.add_argument("--threads", type=int, default=2, help="GENAI_INTRA_OP_THREADS")
    args = ap.parse_args(argv)
    env = {
        "GENAI_MODEL_DIR": str(args.model),
        "GENAI_METRICS_OPEN": "true",
        "GENAI_INTRA_OP_THREADS": str(args.threads),
        "GENAI_MAX_CONCURRENCY": str(max(1, args.in_flight)),
    }
    server = ServerProcess("metrics-scrape", env)
    server.start()
    try:
        if not server.wait_ready():
            raise SystemExit(f"server did not start: {server.error}")
        result = asyncio.run(measure(server.url, args))
    finally:
        server.stop()
    report = {"machine": describe(), "settings": vars(args) | {"model": str(args.model)}}
    print(json.dumps(report | result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
