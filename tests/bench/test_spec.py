"""``python -m bench spec``'s pure parts: fresh prompts per workload, the counts read from a
server's log, and the table's ratios and model-bound projection."""

from __future__ import annotations

from typing import Any

import pytest

from backends.engine.batch.speculation import VERIFY_COST
from bench.spec import ask, counts, render_table

pytestmark = pytest.mark.unit


def test_each_request_is_fresh_and_the_copy_workload_has_something_to_copy() -> None:
    copies = [ask("copy", seed) for seed in range(6)]
    assert len(set(copies)) == 6
    assert all(c.startswith(("Repeat exactly: ", "Echo back: ")) for c in copies)
    assert all(len(c.split()) >= 5 for c in copies)  # three values to copy
    assert ask("free", 1) != ask("free", 2) and "Tell me about" in ask("free", 1)


def test_counts_add_up_the_servers_speculation_lines() -> None:
    log = (
        "INFO speculation: gen-1 drafted 10 tokens, accepted 7, in 3 verify runs\n"
        "INFO something else\n"
        "INFO speculation: gen-2 drafted 4 tokens, accepted 0, in 2 verify runs\n"
    )
    assert counts(log) == (14, 7, 5)
    assert counts("") == (0, 0, 0)


def sample(tps: float, e2e: float, cpu: float, tokens: int, spec: list[int]) -> dict[str, Any]:
    return {
        "output_token_throughput": tps,
        "e2e": {"p50": e2e},
        "server_cpu": cpu,
        "output_tokens": {"total": tokens},
        "ok": 10,
        "speculation": spec,
    }


def test_the_table_gives_ratios_per_round_and_the_model_bound_speed_up() -> None:
    samples = {
        ("off", "copy", 1): [sample(100, 0.5, 1.0, 110, [0, 0, 0])],
        ("on", "copy", 1): [sample(150, 0.4, 0.9, 110, [60, 45, 15])],
    }
    table = render_table(samples, ["off", "on"], ("copy",), (1,))
    [off, on] = [line for line in table.splitlines() if line.startswith("| copy")]
    assert "| 1.50 |" in on and "| 0.80 |" in on and "0.75 (45/60)" in on
    assert "| 4.00 |" in on  # 1 + 45 / 15 tokens per verify run
    # 100 decoded tokens: 40 plain steps and 15 verify runs of 4 drafted tokens on average
    expected = 100 / (40 + 15 * (1 + VERIFY_COST * 4))
    assert on.endswith(f"| {expected:.2f} |") and off.endswith("| 1.00 |")
