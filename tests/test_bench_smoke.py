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
        [sys.executable, "-m", "bench", "run", "--smoke", "--speculation", "--out", str(out)],
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

    # Every server arm asks for min_tokens = max_tokens, so the demo model's end of turn
    # cannot shorten an answer (the probe keeps the field unless the server refuses it).
    assert results["availability"]["min_tokens"] is True, results["availability"]
    single = results["single_stream"]
    raw = next(k for k in single if k.startswith("raw (threads="))
    for arm in (raw, "server stream", "server non-stream"):
        assert {"ttft", "decode_tps", "e2e", "output_tokens"} <= set(single[arm]), arm
        assert single[arm]["output_tokens"]["max"] == 8, (arm, single[arm]["output_tokens"])
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

    # every strategy asked for is either measured or recorded as not available (a strategy
    # the server does not have yet exits at start; the run goes on without it)
    avail = results["availability"]
    for strategy in ("generator", "batch"):
        name = f"scheduler={strategy}"
        assert avail[name] == "ok" or avail[name].startswith("not available"), avail[name]
        assert (name in results["load"]) == (avail[name] == "ok")
    assert avail["llama-server"].startswith("not available")  # never built in smoke mode
    # --speculation: our arms with speculation off and on, measured like the others
    for name in ("speculation=off", "speculation=on"):
        assert avail[name] == "ok", avail[name]
        assert name in results["load"] and f"server stream {name}" in single

    ratios = results["ratios"]
    assert {"server_decode_over_raw", "server_ttft_minus_raw_ms"} <= set(ratios)
    # the batch scheduler's targets: a number, or "n/a: <why>" when a side was not measured
    targets = {
        "batch_c4_over_c1_throughput",
        "batch_c8_over_c1_throughput",
        "batch_decode_over_raw",
        "batch_ttft_minus_raw_ms",
        "batch_c4_over_llama_server_c4",
        "batch_over_generator_ttft_p50_c4",
    }
    assert targets <= set(ratios)
    for key in targets:
        assert isinstance(ratios[key], float) or ratios[key].startswith("n/a: "), key
    assert ratios["batch_c4_over_llama_server_c4"].startswith("n/a: ")
    table = (out / "results.md").read_text()
    assert "### Single stream" in table and "### Ratios" in table
    assert "### Targets" in table


def test_bench_transcribe_smoke() -> None:
    """``python -m bench transcribe``: both arms run and the report adds up (no timings
    checked)."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "transcribe", "--seconds", "5", "--reps", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = json.loads(proc.stdout[proc.stdout.index("{") :])
    for arm in ("direct", "server"):
        row = out[arm]
        assert row["tokens"] > 0
        assert row["real_time_factor"] == pytest.approx(row["median_seconds"] / 5, rel=1e-2)
    assert out["server_over_direct"] > 0


def test_bench_embed_smoke(tmp_path: Path) -> None:
    """The embeddings arm on the tiny embedder: its JSON and table, never its timings."""
    out = tmp_path / "embed"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "embed", "--smoke", "--no-peers", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((out / "embed.json").read_text())
    assert [level["concurrency"] for level in results["levels"]] == [1, 4]
    for level in results["levels"]:
        [row] = level["rounds"]
        assert row["failures"] == 0 and row["sentences_per_s"] > 0
        assert set(row["latency"]) == {"p50", "p99", "mean"}
    assert results["single"]["server_p50_s"] > 0 and results["single"]["bare_session_p50_s"] > 0
    assert "| in flight |" in (out / "embed.md").read_text()
