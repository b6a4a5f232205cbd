"""Where ``prefill_overlap="auto"`` reads a newcomer's prompt, from the costs it has seen."""

from __future__ import annotations

import pytest

from backends.engine.batch.prefill_policy import Average, PrefillPolicy, Read

pytestmark = pytest.mark.unit

MS = 1e-3


def seen(read: float, step: float, read_beside: float | None, step_beside: float | None):
    """A policy that has seen these costs (seconds per prompt token, per decode step)."""
    policy = PrefillPolicy(stall=1.5, probe=4, min_chunk=16)
    policy.prefilled(100, 100 * read, beside=False)
    policy.decoded(step, beside=False)
    if read_beside is not None and step_beside is not None:
        policy.prefilled(100, 100 * read_beside, beside=True)
        policy.decoded(step_beside, beside=True)
    return policy


def test_with_nothing_seen_a_prompt_overlaps() -> None:
    assert PrefillPolicy().plan(8) == Read(8, beside=True)
    half = PrefillPolicy()
    half.decoded(10 * MS, beside=False)  # no read alone yet: no way to tell its stall
    assert half.plan(8) == Read(8, beside=True)


def test_a_prompt_that_stalls_the_rows_little_is_read_whole_in_the_step() -> None:
    # 0.5 ms a token, 20 ms a step: 1.5 steps hold 60 tokens.
    policy = seen(0.5 * MS, 20 * MS, None, None)
    assert policy.plan(60) == Read(60, beside=False)
    # longer: overlap, as nothing says it does not pay
    assert policy.plan(61) == Read(61, beside=True)


def test_a_long_prompt_overlaps_where_overlapping_pays() -> None:
    # The AMD EPYC of docs/benchmarks.md: a 128-token read 97 ms alone, 183 ms beside 8-row
    # decode steps of 13.7 ms alone, 22.5 ms beside: 183 x (1 - 13.7/22.5) = 72 < 97.
    policy = seen(97 / 128 * MS, 13.7 * MS, 183 / 128 * MS, 22.5 * MS)
    assert policy.overlap_pays() is True
    assert policy.plan(128) == Read(128, beside=True)
    assert policy.plan(20) == Read(20, beside=False)  # within 1.5 steps: in the step


def test_where_overlapping_does_not_pay_a_long_prompt_is_read_in_stall_sized_chunks() -> None:
    # Side by side both runs crawl: 300 ms for the read, 40 ms a step (vs 97 and 13.7 alone).
    policy = seen(97 / 128 * MS, 13.7 * MS, 300 / 128 * MS, 40 * MS)
    assert policy.overlap_pays() is False
    budget = int(1.5 * 13.7 / (97 / 128))  # tokens read in 1.5 decode steps
    plans = [policy.plan(500) for _ in range(8)]
    # every 4th (probe) overlaps anyway, so the averages can see it pay again: a chunk of the
    # same size, so a probe costs a short read, not the whole prompt beside the steps
    assert plans == [Read(budget, False)] * 3 + [Read(budget, True)] + [Read(budget, False)] * 3 + [
        Read(budget, True)
    ]


def test_a_chunk_is_never_smaller_than_the_floor() -> None:
    policy = seen(10 * MS, 1 * MS, 30 * MS, 3 * MS)  # a slow read beside fast steps
    assert policy.overlap_pays() is False
    assert policy.plan(100) == Read(16, beside=False)


def test_averages_follow_the_newest_runs() -> None:
    average = Average()
    average.add(1.0)
    assert average.value == 1.0
    for _ in range(40):
        average.add(3.0)
    assert average.value == pytest.approx(3.0, abs=1e-3)


def test_its_figures_read_in_milliseconds_for_the_debug_log() -> None:
    assert str(PrefillPolicy()) == (
        "prompt token - alone, - beside; decode step - alone, - beside; overlap pays: None"
    )
    policy = seen(97 / 128 * MS, 13.7 * MS, 183 / 128 * MS, 22.5 * MS)
    assert str(policy) == (
        "prompt token 0.76 alone, 1.43 beside; decode step 13.70 alone, 22.50 beside; "
        "overlap pays: True"
    )
