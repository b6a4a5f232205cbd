"""``python -m bench agents --smoke`` on the demo model: the workload runs end to end against a
real server and writes its table. Checks structure, never timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.live, pytest.mark.bench]

ROOT = Path(__file__).resolve().parent.parent.parent


def test_bench_agents_smoke(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "agents", "--smoke", "--responses", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    [round_] = results["rounds"]
    ours = round_["ours"]
    assert ours["turns_ok"] == ours["turns"] == 4 and not ours["errors"]  # 2 sessions x 2 turns
    assert ours["output_tokens"] == 4 * 4  # fixed-length answers
    assert ours["cached_tokens"] > 0  # later turns continue their own history
    assert ours["makespan_s"] > 0 and ours["later_ttft_p50_s"] > 0
    # The Responses arm: the same conversations, later turns chained by previous_response_id.
    chained = round_["ours, Responses API"]
    assert chained["turns_ok"] == chained["turns"] == 4 and not chained["errors"]
    assert chained["output_tokens"] == 4 * 4
    later = [t for t in chained["raw"]["turns"] if t["turn"] > 0]
    # Each later turn reads on from its own first turn's KV cache: all of that turn's prompt
    # and answer but the last token (generated, never fed).
    firsts = {t["session"]: t for t in chained["raw"]["turns"] if t["turn"] == 0}
    for t in later:
        first = firsts[t["session"]]
        assert t["cached_tokens"] >= first["prompt_tokens"] + first["output_tokens"] - 1
    assert "| makespan |" in (tmp_path / "results.md").read_text()
    assert results["availability"]["llama-server"].startswith("not available")
