"""The batch engine's sampler on synthetic logits: every adjustment, seeds, and the vectorised
greedy path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from backends.engine.batch.sampler import RowState, choose, repetition_penalty, sample
from backends.types import GenerationParams

pytestmark = pytest.mark.unit

EOS = frozenset({0})


def params(**kw: object) -> GenerationParams:
    return GenerationParams(max_new_tokens=8, **kw)  # type: ignore[arg-type]


def logits(*rows: Sequence[float]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float32)


def test_plain_greedy_rows_take_the_argmax() -> None:
    states = [RowState.create(params(), [1]), RowState.create(params(), [2])]
    picks = choose(logits([0, 1, 5, 2], [9, 1, 5, 2]), states, EOS)
    assert [c.token for c in picks] == [2, 0]
    assert all(c.logprobs is None for c in picks)
    assert all(s.plain_greedy for s in states)


def test_min_tokens_holds_eos_back_then_lets_it_through() -> None:
    state = RowState.create(params(min_new_tokens=2), [1])
    row = [9, 1, 5, 2]
    assert choose(logits(row), [state], EOS)[0].token == 2
    state.accept(2)
    state.accept(2)
    assert state.plain_greedy
    assert choose(logits(row), [state], EOS)[0].token == 0


def test_logit_bias_and_penalties_apply_per_row() -> None:
    biased = RowState.create(params(logit_bias={1: 10.0}), [1])
    penalised = RowState.create(params(presence_penalty=2.0, frequency_penalty=1.0), [1])
    penalised.accept(2)
    plain = RowState.create(params(), [1])
    picks = choose(logits([0, 1, 5, 4.5]).repeat(3, axis=0), [biased, penalised, plain], EOS)
    assert [c.token for c in picks] == [1, 3, 2]


def test_repetition_penalty_is_multiplicative_both_ways() -> None:
    row = np.asarray([2.0, -2.0, 3.0], dtype=np.float32)
    repetition_penalty(row, [0, 1, 1], 2.0)
    assert row.tolist() == [1.0, -4.0, 3.0]
    state = RowState.create(params(repetition_penalty=2.0), [2])  # the prompt counts too
    assert choose(logits([0, 2.0, 3.0]), [state], EOS)[0].token == 1


def test_a_tiny_repetition_penalty_keeps_logprobs_finite() -> None:
    # 5e-324 (found by schemathesis) made a prompt token's score infinite and its logprob NaN,
    # which went out as JSON null where the schema says a number.
    state = RowState.create(params(repetition_penalty=5e-324, logprobs=True), [2])
    [pick] = choose(logits([0, 1.0, 3.0]), [state], EOS)
    assert pick.token == 2 and pick.logprobs is not None
    assert np.isfinite(pick.logprobs).all() and pick.logprobs[2] == pytest.approx(0.0)


def test_logprobs_are_those_of_the_processed_distribution() -> None:
    state = RowState.create(params(logprobs=True, top_logprobs=2), [1])
    [pick] = choose(logits([0, 1, 2]), [state], EOS)
    assert pick.token == 2 and pick.logprobs is not None
    assert np.exp(pick.logprobs).sum() == pytest.approx(1.0)
    assert pick.logprobs[2] == pytest.approx(2 - np.log(np.exp([0, 1, 2]).sum()))


def test_seeded_sampling_is_reproducible_and_seeds_differ() -> None:
    row = np.linspace(0, 3, 50).astype(np.float32)

    def draws(seed: int) -> list[int]:
        p = params(temperature=1.5, seed=seed)
        rng = RowState.create(p, [1]).rng
        return [sample(row, p, rng) for _ in range(20)]

    assert draws(3) == draws(3)
    assert draws(3) != draws(4)


def test_top_k_and_top_p_cut_the_candidates() -> None:
    row = np.asarray([5.0, 4.9, 4.8, -10, -10, -10], dtype=np.float32)
    rng = np.random.default_rng(0)
    top_k = {sample(row, params(temperature=1.0, top_k=2), rng) for _ in range(200)}
    assert top_k == {0, 1}
    top_p = {sample(row, params(temperature=1.0, top_p=0.3), rng) for _ in range(200)}
    assert top_p == {0}
    wide = {sample(row, params(temperature=1.0), rng) for _ in range(300)}
    assert {0, 1, 2} <= wide
