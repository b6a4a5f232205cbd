"""Choosing each row's next token from a step's ``[rows, vocab]`` logits.

Greedy rows with nothing to adjust take one vectorised argmax; the others are processed row by
row with whole-vocabulary numpy operations (no Python loop over the vocabulary): the
repetition penalty, OpenAI's penalties and ``logit_bias`` (``backends/engine/logits.py``), EOS held
back until ``min_new_tokens``, the grammar's mask, then temperature, top-k and top-p with the
sequence's own random generator, so a seeded request is reproducible whatever else runs
beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from backends.engine.batch.guidance import Guide
from backends.engine.logits import log_softmax, process_logits
from backends.types import GenerationParams

Logits = npt.NDArray[np.float32]
FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass
class RowState:
    """One sequence's sampling state."""

    params: GenerationParams
    prompt: Sequence[int]
    rng: np.random.Generator
    guide: Guide | None = None
    counts: Counter[int] = field(default_factory=Counter)  # generated tokens
    generated: int = 0

    @classmethod
    def create(
        cls, params: GenerationParams, prompt: Sequence[int], guide: Guide | None = None
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
            and self.guide is None
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
    """Temperature, then top-k, then top-p (nucleus), then a draw from ``rng``."""
    scaled = row.astype(np.float64) / p.temperature
    candidates = np.arange(scaled.shape[0])
    if 0 < p.top_k < scaled.shape[0]:
        candidates = np.argpartition(-scaled, p.top_k - 1)[: p.top_k]
    scores = scaled[candidates]
    finite = np.isfinite(scores)
    if not finite.any():  # everything masked: fall back to the best raw score
        return int(candidates[np.argmax(scores)])
    probs = np.exp(scores - scores[finite].max())
    order = np.argsort(-probs, kind="stable")
    probs, candidates = probs[order], candidates[order]
    probs /= probs.sum()
    if p.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(probs), p.top_p)) + 1
        probs, candidates = probs[:keep] / probs[:keep].sum(), candidates[:keep]
    index = int(np.searchsorted(np.cumsum(probs), rng.random() * probs.sum(), side="right"))
    return int(candidates[min(index, len(candidates) - 1)])
