"""``python -m bench run --smoke`` on the demo model: the benchmark code keeps working.

Checks the structure of the JSON it writes, never timings (CI machines are noisy). Needs only
the server's runtime and httpx; plots are skipped when matplotlib is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.live, pytest.mark.bench]

ROOT = Path(__file__).resolve().parent.parent

PERCENTILES = {"p50", "p90", "p99", "mean"}


def test_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--smoke", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())

    assert {"meta", "config", "availability", "single_stream", "load", "chat", "ratios"} <= set(
        results
    )
    meta = results["meta"]
    assert meta["cpu_model"] and meta["usable_cpus"] >= 1 and meta["ram_gib"] > 0
    assert meta["versions"]["onnxruntime-genai"]

    single = results["single_stream"]
    raw = next(k for k in single if k.startswith("raw (threads="))
    for arm in (raw, "server stream", "server non-stream"):
        assert {"ttft", "decode_tps", "e2e", "output_tokens"} <= set(single[arm]), arm
        assert single[arm]["output_tokens"]["max"] == 8
        assert {"median", "min", "max", "n"} <= set(single[arm]["ttft"])

    assert results["load"], "no scheduler strategy was measured"
    for kinds in results["load"].values():
        assert [r["concurrency"] for r in kinds["concurrency"]] == [1, 2]
        assert [r["rate"] for r in kinds["poisson"]] == [4.0]
        for r in kinds["concurrency"] + kinds["poisson"]:
            assert r["ok"] == r["requests"] > 0, r["errors"]
            for key in ("ttft", "tpot", "itl", "e2e"):
                assert PERCENTILES <= set(r[key]), key
            assert {"request_throughput", "output_token_throughput", "goodput"} <= set(r)
            assert r["client_cpu_s"] >= 0

    chat = results["chat"]["64"]
    assert {"raw reuse", "raw full prefill", "server default"} <= set(chat)

    ratios = results["ratios"]
    assert {"server_decode_over_raw", "server_ttft_minus_raw_ms"} <= set(ratios)
    table = (out / "results.md").read_text()
    assert "### Single stream" in table and "### Ratios" in table
