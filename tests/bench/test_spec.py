"""``python -m bench spec``'s pure parts: fresh requests per workload, the copied fraction,
the counters read off /metrics, the arms, and the table's ratios."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bench.benchmarks.spec import (
    LLAMA_COUNTERS,
    OURS_COUNTERS,
    _check_vias,
    counters,
    parse_arm,
)
from bench.benchmarks.spec_table import median_interval, render_table
from bench.benchmarks.spec_workloads import WORKLOADS, ask, copied_fraction, source_file

pytestmark = pytest.mark.unit


def test_each_request_is_fresh_and_each_workload_has_its_shape() -> None:
    for workload in WORKLOADS:
        asks = [ask(workload, seed) for seed in range(6)]
        assert len({str(a) for a in asks}) == 6, workload
    copies = [ask("copy", seed)[-1]["content"] for seed in range(6)]
    assert all(c.startswith(("Repeat exactly: ", "Echo back: ")) for c in copies)
    edit = ask("edit", 3)
    assert edit[0]["role"] == "system" and "whole file" in edit[0]["content"]
    assert "def load_" in edit[1]["content"] and "answer with the file" in edit[1]["content"]
    assert "unified diff" in ask("diff", 3)[0]["content"]
    assert "Tell me about" in ask("free", 1)[0]["content"]
    with pytest.raises(ValueError, match="unknown workload"):
        ask("poetry", 1)


def test_the_change_asked_for_is_one_line_of_the_file() -> None:
    for seed in range(20):
        _, text, old, new = source_file(random.Random(seed))
        assert text.count(old) == 1 and old != new and new not in text


def test_the_copied_fraction_counts_the_answers_characters_that_stand_in_the_prompt() -> None:
    prompt = "Here is src/app.py:\nTIMEOUT = 10\nROOT = '/var/lib/app'\n"
    assert copied_fraction(prompt, "TIMEOUT = 10\nROOT = '/var/lib/app'") == 1.0
    assert copied_fraction(prompt, "something else entirely") == 0.0
    half = copied_fraction(prompt, "TIMEOUT = 30" + "x" * 12)  # "TIMEOUT = " copies, 30 not
    assert 0.3 < half < 0.5
    assert copied_fraction(prompt, "") == 0.0 and copied_fraction(prompt, "app") == 1.0


def test_counters_are_read_off_both_servers_metrics() -> None:
    ours = (
        "# HELP genai_speculative_draft_tokens_total x\n"
        'genai_speculative_draft_tokens_total{model="a"} 10.0\n'
        'genai_speculative_draft_tokens_total{model="b"} 4.0\n'
        'genai_speculative_accepted_tokens_total{model="a"} 7.0\n'
        'genai_speculative_verify_runs_total{model="a"} 3.0\n'
        'genai_speculative_acceptance_rate{model="a"} 0.7\n'
    )
    assert counters(ours, OURS_COUNTERS) == (14, 7, 3)
    llama = (
        "llamacpp:spec_decode_num_draft_tokens_total 96\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 20\n"
        "llamacpp:spec_decode_num_drafts_total 2\n"
    )
    assert counters(llama, LLAMA_COUNTERS) == (96, 20, 2)
    assert counters("", OURS_COUNTERS) == (0, 0, 0)


def test_arms_from_the_command_line() -> None:
    ours = parse_arm("on k=16:GENAI_SPECULATIVE_TOKENS=16,GENAI_SCHEDULER=batch")
    assert ours.name == "on k=16" and ours.llama_args is None
    assert ours.env == {"GENAI_SPECULATIVE_TOKENS": "16", "GENAI_SCHEDULER": "batch"}
    assert ours.runs(8)
    llama = parse_arm("simple:llama:--spec-type ngram-simple@1,2")
    assert llama.llama_args == ["--spec-type", "ngram-simple"]
    assert llama.runs(2) and not llama.runs(4)
    off = parse_arm('off:on+{"speculative": {"num_speculative_tokens": 0}}@1,4')
    assert (off.via, off.server, off.env) == ("on", "on", {})
    assert off.body == {"speculative": {"num_speculative_tokens": 0}}
    assert off.runs(4) and not off.runs(8) and ours.server == "on k=16"
    with pytest.raises(ValueError, match="JSON object"):
        parse_arm("off:on+[1]")


def test_an_arm_on_another_arms_server_names_ours_and_takes_its_turn() -> None:
    on, llama = parse_arm("on:GENAI_SPECULATIVE_TOKENS=8"), parse_arm("l:llama:")
    off = parse_arm('off:on+{"speculative": {"num_speculative_tokens": 0}}')
    _check_vias([off, on], together=False)
    with pytest.raises(ValueError, match="cannot run --together"):
        _check_vias([off, on], together=True)
    with pytest.raises(ValueError, match="not our server's arm"):
        _check_vias([parse_arm('x:l+{"a": 1}'), llama], together=False)


def sample(decode: list[float], e2e: list[float], cpu: float, spec: list[int]) -> dict[str, Any]:
    return {
        "decode": decode,
        "e2e": e2e,
        "cpu_per_token": cpu,
        "engine_cpu_per_token": cpu / 4,
        "tokens": [20] * len(e2e),
        "copied": [0.5] * len(e2e),
        "speculation": spec,
        "load": 7.0,
    }


def test_the_table_gives_per_round_ratios_their_range_and_the_counts() -> None:
    samples = {
        ("off", "copy", "greedy", 1): [
            sample([100, 100], [0.5, 0.5], 0.001, [0, 0, 0]),
            sample([200, 200], [0.4, 0.4], 0.002, [0, 0, 0]),
        ],
        ("on", "copy", "greedy", 1): [
            sample([150, 150], [0.4, 0.4], 0.0009, [40, 30, 10]),
            sample([200, 200], [0.4, 0.4], 0.002, [20, 15, 5]),
        ],
    }
    table = render_table(samples, ["off", "on"], ("copy",), ("greedy",), (1,))
    [off, on] = [line for line in table.splitlines() if line.startswith("| copy")]
    cells = [c.strip() for c in on.strip("|").split("|")]
    assert cells[5] == "1.25 (1.00–1.50)"  # decode: 150/100 and 200/200
    assert cells[7] == "0.90 (0.80–1.00)"  # time per answer: 0.4/0.5 and 0.4/0.4
    assert cells[10] == "0.362" and cells[11] == "0.95 (0.90–1.00)"  # the engine's CPU, ms
    assert cells[12] == "0.75 (45/60)" and cells[13] == "4.00"  # 1 + 45 / 15 verify runs
    assert cells[14] == "0.50" and cells[15] == "20"
    assert "— | — |" in off and "load average (1 min) while it ran: 7.0 to 7.0" in table


def test_the_median_interval_is_the_order_statistics_of_binomial_coverage() -> None:
    assert median_interval([1.0] * 5) is None  # [min, max] covers 1 - 2/32 < 0.95
    assert median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)  # 1 - 2/64
    # n = 20: P(B < 6) = 0.021 (coverage 0.959), P(B < 7) = 0.058 (0.885): x(6) and x(15)
    assert median_interval([float(i) for i in range(20, 0, -1)]) == (6.0, 15.0)
    # the table shows it once there are enough rounds
    rounds = [sample([100 + i], [0.5], 0.001, [0, 0, 0]) for i in range(8)]
    both = {("off", "free", "greedy", 1): rounds, ("on", "free", "greedy", 1): rounds}
    table = render_table(both, ["off", "on"], ("free",), ("greedy",), (1,))
    assert "1.00 (1.00–1.00; 95% CI 1.00–1.00)" in table
