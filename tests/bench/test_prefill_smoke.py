"""``python -m bench prefill --smoke`` and ``--profile`` on the demo model: the arms run and
the tables come out. Checks structure, never timings (CI machines are noisy)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.benchmarks.prefill import table

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO = ROOT / "models" / "demo-llama"


def bench(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "prefill", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.live
@pytest.mark.bench
def test_bench_prefill_smoke(tmp_path: Path) -> None:
    out = bench(
        "--smoke", "--cpu-time", "--session", f"chunked={DEMO},chunk=16", "--out", str(tmp_path)
    )
    results = json.loads((tmp_path / "prefill.json").read_text())
    seconds = results["seconds"]
    arms = {"server", "onnxruntime session", "onnxruntime session (CPU time)", "chunked"}
    assert arms <= set(seconds), seconds.keys()
    for arm in arms:
        assert set(seconds[arm]) == {"32", "64"} and all(
            len(v) == 1 and v[0] > 0 for v in seconds[arm].values()
        ), arm
    assert results["availability"]["llama-server"].startswith("not available")
    assert "| 32 |" in out and "| 64 |" in out and "AVX2 " in out and "AMX " in out
    assert (tmp_path / "prefill.md").read_text() in out


@pytest.mark.live
@pytest.mark.bench
def test_bench_prefill_profile() -> None:
    out = bench("--lengths", "48", "--threads", "1", "--profile", str(DEMO))
    for row in ("MatMulNBits: MLP", "GroupQueryAttention", "RMS norms", "total (model_run)"):
        assert f"| {row}" in out, out
    assert "48-token prefill, 1 intra-op threads" in out


@pytest.mark.unit
def test_the_table_gives_tokens_per_second_and_the_ratios() -> None:
    results = {
        "seconds": {
            "server": {"100": [0.5, 0.4, 0.6]},
            "llama-server": {"100": [0.25]},
            "onnxruntime session": {"100": [0.2]},
            "llama-bench": {"100": [0.4]},
        },
        "config": {"lengths": [100], "rounds": 3, "threads": 2, "model": "m", "sessions": {}},
        "meta": {
            "cpu_model": "CPU X",
            "usable_cpus": 2,
            "cpu_flags": ["avx2", "avx512f", "avx512_vnni"],
            "load_before": [1.5, 0, 0],
            "load_after": [2.5, 0, 0],
            "date_utc": "today",
            "versions": {"onnxruntime": "1.31.1"},
            "source": {"commit": "abc", "dirty": False},
        },
        "availability": {"server": "ok", "llama-server": "ok", "x": "not available: why"},
    }
    text = table(results)
    header, _, row = text.splitlines()[:3]
    assert header.split(" | ")[1:4] == ["server", "onnxruntime session", "llama-server"]
    # 100 tokens in a median 0.5 s: 200 tokens/s (range 167-250); theirs 400: ours ÷ theirs 0.5
    assert row.startswith("| 100 | 200 (167–250) | 500 (500–500) | 400 (400–400) |")
    assert row.endswith("| 0.50 | 2.00 |")
    assert "AVX2 yes · AVX-512 yes · VNNI yes (avx512_vnni) · AMX no" in text
    assert "before, after: 1.5, 2.5" in text and "x: not available: why" in text
