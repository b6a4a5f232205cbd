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


# ---- reproducible draws: a last-bit difference in the logits must not move them ---------------
BENCH_VOCAB = 49_152  # the benchmark model's vocabulary (SmolLM2-135M shape)
PAIRS = 40  # the likeliest tokens come in pairs of equal logits, 0.1 apart pair to pair


def paired_logits(vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Logits whose likeliest tokens come in exactly tied pairs (scattered over the vocabulary)
    and whose tail is full of ties too, as a row and a copy nudged by one float32 step up or
    down per token: the bits a different batch size or prefill chunking changes. A sorted draw
    swaps tied tokens under such a nudge; a draw in vocabulary order does not."""
    gen = np.random.default_rng(1)
    row = np.round(gen.normal(-4.0, 1.0, vocab), 1).astype(np.float32)  # ties in the tail
    top = gen.choice(vocab, 2 * PAIRS, replace=False)
    row[top] = np.repeat(8.0 - 0.1 * np.arange(PAIRS), 2).astype(np.float32)
    up = gen.random(vocab) < 0.5
    nudged = np.where(up, np.nextafter(row, np.inf), np.nextafter(row, -np.inf))
    return row, nudged.astype(np.float32)


def pair_mass_top_p(row: np.ndarray, pairs: int, temperature: float) -> float:
    """A top-p that ends the nucleus inside the ``pairs``-th pair's second token, away from
    any boundary a nudge could move."""
    probs = np.exp(row.astype(np.float64) / temperature)
    ranked = np.sort(probs)[::-1]
    through = ranked[: 2 * pairs].sum()
    return float((through - ranked[2 * pairs - 1] / 2) / probs.sum())


@pytest.mark.parametrize("vocab", [1024, BENCH_VOCAB])
@pytest.mark.parametrize("cut", ["none", "top_k", "top_p", "both"])
def test_a_last_bit_difference_does_not_move_a_seeded_draw(vocab: int, cut: str) -> None:
    row, nudged = paired_logits(vocab)
    assert not np.array_equal(row, nudged)
    temperature = 0.9
    cuts: dict[str, object] = {}
    if cut in ("top_k", "both"):
        cuts["top_k"] = 2 * 25  # ends on a pair's second token: ties kept whole
    if cut in ("top_p", "both"):
        cuts["top_p"] = pair_mass_top_p(row, 10, temperature)

    def draws(logits: np.ndarray, seed: int) -> list[int]:
        p = params(temperature=temperature, seed=seed, **cuts)
        rng = RowState.create(p, [1]).rng
        return [sample(logits, p, rng) for _ in range(300)]

    for seed in (3, 11):
        base = draws(row, seed)
        assert draws(nudged, seed) == base
        assert len(set(base)) > 10  # a real spread of tokens was drawn, ties among them
    if "top_k" in cuts:
        assert set(draws(row, 5)) <= set(np.argsort(-row, kind="stable")[:50].tolist())


def test_top_p_keeps_the_smallest_likeliest_set_and_ties_at_its_edge() -> None:
    row = np.log(np.asarray([0.1, 0.4, 0.2, 0.2, 0.1], dtype=np.float32))
    rng = np.random.default_rng(0)
    drawn = {sample(row, params(temperature=1.0, top_p=0.5), rng) for _ in range(300)}
    assert drawn == {1, 2, 3}  # 0.4 is not enough, 0.4 + 0.2 is; the other 0.2 ties with it
    drawn = {sample(row, params(temperature=1.0, top_p=0.4), rng) for _ in range(300)}
    assert drawn == {1}


def test_a_draw_follows_the_distribution() -> None:
    row = np.asarray([np.log(0.5), -np.inf, np.log(0.3), np.log(0.2)], dtype=np.float32)
    rng = np.random.default_rng(0)
    counts = np.bincount([sample(row, params(temperature=1.0), rng) for _ in range(4000)], None, 4)
    assert counts[1] == 0
    assert np.allclose(counts / 4000, [0.5, 0.0, 0.3, 0.2], atol=0.03)


def test_min_p_keeps_the_tokens_at_least_that_share_of_the_likeliest() -> None:
    probs = np.asarray([0.40, 0.25, 0.20, 0.10, 0.05], dtype=np.float64)
    row = np.log(probs).astype(np.float32)
    rng = np.random.default_rng(0)
    # 0.45 × 0.40 = 0.18: the 0.20 token is kept, the 0.10 one is cut
    drawn = {sample(row, params(temperature=1.0, min_p=0.45), rng) for _ in range(400)}
    assert drawn == {0, 1, 2}
    # temperature first: at 2, the shares are their square roots, 0.1 / 0.4 -> 0.5, kept
    hot = {sample(row, params(temperature=2.0, min_p=0.45), rng) for _ in range(600)}
    assert hot == {0, 1, 2, 3}
    # then top-k within what min-p left, and the draw follows the renormalised rest
    once = {sample(row, params(temperature=1.0, min_p=0.45, top_k=1), rng) for _ in range(50)}
    assert once == {0}
    counts = np.bincount(
        [sample(row, params(temperature=1.0, min_p=0.45), rng) for _ in range(4000)], None, 5
    )
    assert np.allclose(counts / 4000, [0.40 / 0.85, 0.25 / 0.85, 0.20 / 0.85, 0, 0], atol=0.03)


def test_min_p_sees_the_grammar_mask_and_leaves_greedy_alone() -> None:
    row = np.asarray([-np.inf, 1.0, 0.8, -3.0], dtype=np.float32)  # the likeliest masked
    rng = np.random.default_rng(0)
    assert {sample(row, params(temperature=1.0, min_p=0.5), rng) for _ in range(300)} == {1, 2}
    state = RowState.create(params(min_p=0.9), [1])
    assert state.plain_greedy and choose(logits([0, 3, 2.9]), [state], EOS)[0].token == 1


@pytest.mark.parametrize("vocab", [1024, BENCH_VOCAB])
def test_a_last_bit_difference_does_not_move_a_min_p_draw(vocab: int) -> None:
    row, nudged = paired_logits(vocab)
    temperature = 0.9
    # min_p's threshold half-way between two pairs' probabilities: no nudge moves it
    ranked = np.sort(np.exp(row.astype(np.float64) / temperature))[::-1]
    min_p = float((ranked[2 * 12 - 1] + ranked[2 * 12]) / 2 / ranked[0])

    def draws(logits: np.ndarray, seed: int) -> list[int]:
        p = params(temperature=temperature, seed=seed, min_p=min_p)
        rng = RowState.create(p, [1]).rng
        return [sample(logits, p, rng) for _ in range(300)]

    base = draws(row, 7)
    assert draws(nudged, 7) == base
    assert len(set(base)) > 10 and set(base) <= set(np.argsort(-row, kind="stable")[:24].tolist())
