"""Choosing each row's next token from a step's ``[rows, vocab]`` logits.

Greedy rows with nothing to adjust take one vectorised argmax; the others are processed row by
row with whole-vocabulary numpy operations (no Python loop over the vocabulary): the
repetition penalty, OpenAI's penalties and ``logit_bias`` (``backends/engine/logits.py``), EOS held
back until ``min_new_tokens``, the grammar's mask, then temperature, min-p, top-k and top-p with
the sequence's own random generator, so a seeded request is reproducible whatever else runs
beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from backends.engine.batch.guidance import Constraint
from backends.engine.logits import log_softmax, min_p_kept, process_logits
from backends.types import GenerationParams

Logits = npt.NDArray[np.float32]
FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass
class RowState:
    """One sequence's sampling state."""

    params: GenerationParams
    prompt: Sequence[int]
    rng: np.random.Generator
    guide: Constraint | None = None
    counts: Counter[int] = field(default_factory=Counter)  # generated tokens
    generated: int = 0

    @classmethod
    def create(
        cls, params: GenerationParams, prompt: Sequence[int], guide: Constraint | None = None
    ) -> RowState:
        return cls(params, prompt, np.random.default_rng(params.seed), guide)

    @property
    def plain_greedy(self) -> bool:
        """Argmax of the raw logits decides: nothing to adjust, nothing to report."""
        p = self.params
        return (
            p.greedy
            and not p.edits_logits
            and p.repetition_penalty == 1.0
            and (self.guide is None or not self.guide.constrains)
            and self.generated >= p.min_new_tokens
        )

    def accept(self, token: int) -> None:
        self.counts[token] += 1
        self.generated += 1


@dataclass(frozen=True)
class Choice:
    token: int
    logprobs: Logits | None  # the processed distribution's log-probabilities, if asked


def repetition_penalty(row: Logits, tokens: Iterable[int], penalty: float) -> None:
    """HF/CTRL's multiplicative penalty on every token already in the sequence, in place."""
    ids = np.fromiter(set(tokens), dtype=np.int64)
    if ids.size:
        scores = row[ids]
        with np.errstate(over="ignore", divide="ignore"):  # a tiny penalty: finite below
            penalized = np.where(scores > 0, scores / penalty, scores * penalty)
        row[ids] = np.clip(penalized, -FLOAT32_MAX, FLOAT32_MAX)


def choose(logits: Logits, states: Sequence[RowState], eos_ids: frozenset[int]) -> list[Choice]:
    """The next token of every row (``logits[i]`` belongs to ``states[i]``)."""
    out: list[Choice | None] = [None] * len(states)
    plain = [i for i, s in enumerate(states) if s.plain_greedy]
    if plain:
        for i, token in zip(plain, np.argmax(logits[plain], axis=1), strict=True):
            out[i] = Choice(int(token), None)
    for i, state in enumerate(states):
        if out[i] is None:
            out[i] = _choose_row(logits[i], state, eos_ids)
    return [c for c in out if c is not None]


def _choose_row(raw: Logits, state: RowState, eos_ids: frozenset[int]) -> Choice:
    p = state.params
    suppress_eos = state.generated < p.min_new_tokens
    row = process_logits(raw, p, state.counts, eos_ids, suppress_eos=suppress_eos)
    if p.repetition_penalty != 1.0:
        repetition_penalty(row, [*state.prompt, *state.counts], p.repetition_penalty)
    if state.guide is not None:
        state.guide.mask(row)
    logprobs = log_softmax(row) if p.logprobs or p.top_logprobs else None
    if p.greedy:
        return Choice(int(np.argmax(row)), logprobs)
    return Choice(sample(row, p, state.rng), logprobs)


def sample(row: Logits, p: GenerationParams, rng: np.random.Generator) -> int:
    """Temperature, then min-p, top-k and top-p as masks, then a seeded draw tied to token ids.

    Each token of the vocabulary gets its own exponential noise ``E``, drawn in vocabulary
    order, and the token with the largest ``probability / E`` wins: an exact draw from the
    distribution (the exponential race, Gumbel-max's twin, as vLLM samples). A draw along a
    sorted order would not hold: tokens of nearly equal probability trade places on the last
    float bit, which moves with the batch size and prefill chunking, and the draw would land on
    an unrelated token. Walking a cumulative sum in vocabulary order is not enough either: the
    last bits of the likely tokens shift the boundaries of the unlikely ones after them. Here
    a last-bit difference changes the winner only when the two best ``probability / E`` are
    within that bit of each other. Top-k and top-p only choose a threshold (ties at it are all
    kept), so they reorder nothing; min-p's threshold is a fixed share of the likeliest
    token's probability, so it reorders nothing either."""
    scaled = row.astype(np.float64) / p.temperature
    # The same amount of randomness each step, one number per token id.
    noise = rng.standard_exponential(len(scaled))
    finite = np.isfinite(scaled)
    if finite.all():  # nothing masked (no grammar): no copies
        candidates, scores = np.arange(len(scaled)), scaled
    else:
        candidates = np.flatnonzero(finite)
        if candidates.size == 0:  # everything masked: fall back to the best raw score
            return int(np.argmax(row))
        scores = scaled[candidates]
    if p.min_p > 0:
        kept = min_p_kept(scores, p.min_p)
        candidates, scores = candidates[kept], scores[kept]
    if 0 < p.top_k < candidates.size:
        kth = np.partition(scores, candidates.size - p.top_k)[candidates.size - p.top_k]
        candidates, scores = candidates[scores >= kth], scores[scores >= kth]
    probs = np.exp(scores - scores.max())
    if p.top_p < 1.0:
        kept = probs >= _nucleus_threshold(probs, p.top_p)
        candidates, probs = candidates[kept], probs[kept]
    if candidates.size < len(noise):
        noise = noise[candidates]
    with np.errstate(divide="ignore"):  # a noise of exactly 0 wins, as it should
        return int(candidates[np.argmax(probs / noise)])


def _nucleus_threshold(probs: Logits, top_p: float) -> float:
    """The smallest probability in the smallest set of the likeliest tokens whose mass
    reaches ``top_p`` of the whole (at least the likeliest token)."""
    ranked = np.sort(probs)[::-1]
    mass = np.cumsum(ranked)
    count = int(np.searchsorted(mass, top_p * mass[-1])) + 1
    return float(ranked[min(count, ranked.shape[0]) - 1])
