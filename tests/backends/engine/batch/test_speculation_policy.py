"""The speculation rule against cost profiles, and the cost figures it reads: timed runs
replace the prior constants, and probes keep them fresh. No model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from backends.engine.batch.speculation import DraftLength, Speculation
from backends.engine.batch.speculation_policy import (
    PROBE_STEPS,
    REFRESH,
    Costs,
    best_draft,
    expected_tokens,
    prior_step,
    prior_verify,
)
from tests.backends.engine.batch.test_ngram import _Seq

pytestmark = pytest.mark.unit

T1 = 0.010  # a one-row decode step, seconds


def timed(step: Callable[[int], float], verify: Callable[[int], float], most: int = 8) -> Costs:
    """Costs as the strategy would time them: batched steps of 1..8 rows, then verify runs
    of 1 + k tokens, k = 1..most (each the first of its kind: the rule reads it at once)."""
    costs = Costs()
    for rows in range(1, 9):
        costs.stepped(rows, step(rows))
    for k in range(1, most + 1):
        costs.verified(k, verify(k))
    return costs


def batched(rows: int) -> float:
    """A decode step of ``rows`` rows: half a one-row step per row beyond the first, about
    what an 8-row step costs on 2 cores (4x a one-row step)."""
    return T1 * (1 + (rows - 1) * 3 / 7)


def slow_at_several_positions(k: int) -> float:
    """A kernel slow at several positions: a run of 1 + k tokens costs 1 + k one-row steps."""
    return (1 + k) * T1


def cheap(k: int) -> float:
    """A run of 1 + k tokens costs what a one-row step does (a memory-bound model)."""
    return T1


def rule(costs: Costs, p: float, rows: int, most: int = 8) -> int:
    return best_draft(p, rows, most, costs.step, costs.verify)


def test_expected_tokens() -> None:
    assert expected_tokens(3, 0.0) == 1.0 and expected_tokens(3, 1.0) == 4.0
    assert expected_tokens(1, 0.5) == pytest.approx(1.5)


def test_expensive_verify_runs_keep_a_row_from_drafting() -> None:
    costs = timed(batched, slow_at_several_positions)
    assert rule(costs, 0.7, 8) == 0
    # Alone too: a run of 1 + k tokens never yields more than 1 + k tokens.
    assert rule(costs, 0.7, 1) == 0
    assert rule(costs, 0.99, 1) == 0 and rule(costs, 0.99, 8) == 0
    assert DraftLength(8, hits=7.0, judged=10.0).wanted(8, costs) == 0


def test_cheap_verify_runs_let_it_draft() -> None:
    costs = timed(batched, cheap)
    assert rule(costs, 0.7, 1) == 8  # alone: every token it may
    assert rule(costs, 0.7, 8) > 0  # and beside seven others
    assert DraftLength(8, hits=7.0, judged=10.0).wanted(8, costs) > 0
    assert rule(costs, 0.3, 8) == 0  # not a row whose drafts mostly miss


def test_the_rule_counts_the_wait_of_every_other_row() -> None:
    """A verify run whose own tokens come faster than a batched step's (``E / V > B / T(B)``,
    what the rule weighed before) still does not pay if the tokens it gains beyond its row's
    one do not make up for the time all 8 rows wait for it."""
    costs = timed(lambda rows: T1 * max(1.0, rows / 2), lambda k: (1 + k / 4) * T1)
    p, rows = 0.9, 8
    own_pace = expected_tokens(8, p) / costs.verify(8)
    assert own_pace > rows / costs.step(rows)  # its own tokens a second beat the batch's
    assert rule(costs, p, rows) == 0
    assert rule(costs, 0.99, rows) > 0  # a row that copies nearly everything still drafts


def test_the_prior_figures_until_runs_are_timed() -> None:
    costs = Costs()
    assert costs.step(8) / costs.step(1) == pytest.approx(prior_step(8))
    assert costs.verify(4) / costs.step(1) == pytest.approx(prior_verify(4))
    assert rule(costs, 0.7, 1) > 0  # the constants: a new row drafts alone
    assert rule(costs, 0.33, 1) == 0 < rule(costs, 0.34, 1)  # from p = 1/3 alone


def test_timed_runs_replace_the_constants() -> None:
    costs, length = Costs(), DraftLength(8, hits=7.0, judged=10.0)
    assert length.wanted(1, costs) > 0  # the prior: a verify run is cheap
    costs.stepped(1, T1)
    costs.stepped(8, 4 * T1)
    costs.verified(1, 2 * T1)
    costs.verified(4, 5 * T1)
    assert costs.step(1) == T1 and costs.step(8) == 4 * T1
    assert costs.verify(1) == 2 * T1 and costs.verify(4) == pytest.approx(5 * T1)
    # not timed: scaled from what was, by the prior's shape
    assert costs.step(6) == pytest.approx(4 * T1 * prior_step(6) / prior_step(8))
    assert costs.verify(2) == pytest.approx(2 * T1 * prior_verify(2) / prior_verify(1))
    # A run of 1 + k tokens costs 1 + k steps here: no draft pays, even alone (the row then
    # probes its acceptance with one token now and then).
    assert rule(costs, 0.7, 1) == 0
    assert [length.wanted(1, costs) for _ in range(3)] == [1, 0, 0]
    # Moving averages: the machine got quicker, and the figures follow (at the next refresh).
    for _ in range(REFRESH):
        costs.stepped(1, T1 / 2)
        costs.verified(1, T1 / 2)
    assert T1 / 2 < costs.step(1) < T1 and T1 / 2 < costs.verify(1) < 2 * T1 * 0.75
    # V(4) follows V(1): the shape q(4) = 2.5 stays the kernel's
    assert costs.verify(4) == pytest.approx(costs.verify(1) * 2.5)


def rows_at(spec: Speculation, p: float, count: int = 8) -> list[_Seq]:
    seqs = [_Seq([1, 2, 3, 4, 5, 6, 1, 2, 3], 4) for _ in range(count)]
    for seq in seqs:
        spec.drafter(seq).length = DraftLength(spec.tokens, hits=100 * p, judged=100.0)
    return seqs


def test_a_cost_probe_keeps_the_verify_figures_fresh() -> None:
    """Where verify runs look too dear to draft, one row drafts one token now and then, so
    a machine that got quicker is seen; not a row whose drafts would not pay anyway."""
    spec = Speculation(8, costs=timed(batched, slow_at_several_positions))
    seqs = rows_at(spec, 0.9)
    seen = [spec.drafts(seqs, lambda seq: 99) for _ in range(2 * PROBE_STEPS + 2)]
    probes = [(i, [(seqs.index(s), d) for s, d in out]) for i, out in enumerate(seen) if out]
    assert probes == [(PROBE_STEPS, [(0, [5])]), (2 * PROBE_STEPS + 1, [(0, [5])])]
    free = Speculation(8, costs=timed(batched, slow_at_several_positions))
    missing = rows_at(free, 0.2)
    asked: list[int] = []
    could_pay = free._could_pay

    def spy(drafter: Any, rows: int) -> bool:
        asked.append(rows)
        return could_pay(drafter, rows)

    free._could_pay = spy  # type: ignore[method-assign]
    assert not any(free.drafts(missing, lambda seq: 99) for _ in range(2 * PROBE_STEPS + 2))
    assert asked == [8] * 16  # each row asked once when a probe came due, not every step after


def test_a_row_that_drafts_resets_the_probe_clock() -> None:
    spec = Speculation(8, costs=timed(batched, cheap))
    seqs = rows_at(spec, 0.9)
    for _ in range(PROBE_STEPS + 2):
        assert len(spec.drafts(seqs, lambda seq: 99)) == 8
    assert spec.costs.idle == 0
