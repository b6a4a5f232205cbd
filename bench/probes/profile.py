"""``python -m bench profile``: where the server spends its time serving one stream.

Starts the server on the benchmark model, samples the thread holding the GIL with py-spy
(``pip install py-spy``) while single-stream requests run (a fresh 128-token prompt each, so
prefix reuse does not hide the prefill), and writes the collapsed stacks plus a summary of
the functions with the most samples (inclusive and self) under bench/results/profile/.
"""

from __future__ import annotations

import asyncio
import collections
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness.clients import RequestSpec, make_client
from bench.harness.loadgen import run_load
from bench.harness.model_cache import ensure_models
from bench.harness.paths import DEMO
from bench.harness.prompts import PromptMaker
from bench.harness.server import ServerProcess
from bench.peers.raw import RawEngine


def summarize(raw: Path, top: int = 30) -> dict[str, Any]:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        threads[frames[0]] += n
        for f in set(frames[1:]):
            inclusive[f] += n
        own[frames[-1]] += n
    share = {k: round(v / total, 4) for k, v in inclusive.most_common(top)}
    return {
        "samples": total,
        "threads": {k: round(v / total, 4) for k, v in threads.most_common(10)},
        "inclusive": share,
        "self": {k: round(v / total, 4) for k, v in own.most_common(top)},
    }


def profile(shape: str, seconds: int, out: Path, env: dict[str, str], protocol: str) -> Path:
    local = Path(sys.executable).parent / "py-spy"
    pyspy = str(local) if local.exists() else shutil.which("py-spy")
    if pyspy is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    model = DEMO if shape == "demo" else ensure_models(shape)["int4"]
    prompts = PromptMaker(RawEngine(model, threads=1).tokenizer)
    srv = ServerProcess("profile", {"GENAI_MODEL_DIR": str(model), **env})
    srv.start()
    out.mkdir(parents=True, exist_ok=True)
    try:
        if not srv.wait_ready():
            raise SystemExit(f"server did not start: {srv.error}")
        assert srv.proc is not None
        raw = out / "server.collapsed.txt"
        spy = subprocess.Popen(
            [pyspy, "record", "--pid", str(srv.proc.pid), "--duration", str(seconds)]
            # --gil: only the thread holding the GIL is sampled, i.e. the Python work that
            # competes with the owner thread's model steps (those hold the GIL too)
            + ["--rate", "200", "--format", "raw", "--threads", "--gil", "-o", str(raw)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        client = make_client(srv.url, protocol=protocol)
        deadline = time.monotonic() + seconds
        summaries = []

        def load() -> None:
            seed = 50_000
            while time.monotonic() < deadline:
                seed += 1
                spec = [RequestSpec(prompts.exact(128, seed)[0], 64)]
                summaries.append(asyncio.run(run_load(client, spec, concurrency=1, progress=False)))

        t = threading.Thread(target=load)
        t.start()
        t.join()
        spy.wait(60)
        result = summarize(raw)
        result["requests"] = len(summaries)
        result["gil_held_share"] = round(result["samples"] / (200 * seconds), 3)
        result["decode_tps_median"] = sorted(
            (x["output_tokens"]["total"] - 1) / max(1e-9, x["e2e"]["p50"] - x["ttft"]["p50"])
            for x in summaries
        )[len(summaries) // 2]
        result["env"] = env
        (out / "summary.json").write_text(json.dumps(result, indent=2))
        return out / "summary.json"
    finally:
        srv.stop()
