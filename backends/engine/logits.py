"""Logit processing the engine does not do natively: pure numpy, unit-tested.

OpenAI's presence/frequency penalties and logit_bias, suppressing EOS until ``min_new_tokens``,
min-p's cut, and log-probabilities for the ``logprobs`` option.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import numpy.typing as npt

from backends.types import Logprob, SamplingParams

Logits = npt.NDArray[np.float32]


def process_logits(
    logits: Logits,
    params: SamplingParams,
    generated: Counter[int],
    eos_ids: Iterable[int],
    *,
    suppress_eos: bool,
) -> Logits:
    """A processed copy of one step's logits (1-D, vocabulary-sized); ``suppress_eos`` while
    ``min_new_tokens`` is not reached (unless the engine already does it natively)."""
    out = np.array(logits, dtype=np.float32, copy=True).reshape(-1)
    if params.logit_bias:
        _apply_bias(out, params.logit_bias)
    if generated and (params.presence_penalty or params.frequency_penalty):
        ids = np.fromiter(generated.keys(), dtype=np.int64)
        counts = np.fromiter(generated.values(), dtype=np.float32)
        out[ids] -= params.frequency_penalty * counts + params.presence_penalty
    if suppress_eos:
        for eos in eos_ids:
            out[eos] = -np.inf
    return out


def min_p_kept(scaled: npt.NDArray[np.float64], min_p: float) -> npt.NDArray[np.bool_]:
    """Which tokens min-p keeps, from their temperature-scaled logits: those whose probability
    is at least ``min_p`` times the likeliest's (``scaled - max >= log(min_p)``), a threshold in
    vocabulary order like top-k's and top-p's (ties at it are kept). Masked (-inf) tokens are
    never kept."""
    finite = np.isfinite(scaled)
    if not finite.any():
        return finite
    kept: npt.NDArray[np.bool_] = finite & (scaled >= scaled[finite].max() + math.log(min_p))
    return kept


def min_p_cut(logits: Logits, min_p: float, temperature: float) -> None:
    """Mask (-inf) the tokens min-p cuts at ``temperature``, in place: for og.Generator, which
    samples from what is left."""
    kept = min_p_kept(logits.astype(np.float64) / temperature, min_p)
    if kept.any():
        logits[~kept] = -np.inf


def _apply_bias(out: Logits, bias: Mapping[int, float]) -> None:
    for token, value in bias.items():
        out[int(token)] += value


def log_softmax(logits: Logits) -> Logits:
    shifted = logits - np.max(logits[np.isfinite(logits)], initial=0.0)
    with np.errstate(divide="ignore", over="ignore"):
        result: Logits = shifted - np.log(np.sum(np.exp(shifted)))
    return result


def top_logprobs(logprobs: Logits, k: int) -> tuple[tuple[int, float], ...]:
    """The ``k`` most likely tokens with their log-probabilities, most likely first."""
    if k <= 0:
        return ()
    k = min(k, logprobs.shape[0])
    idx = np.argpartition(-logprobs, k - 1)[:k]
    idx = idx[np.argsort(-logprobs[idx], kind="stable")]
    return tuple((int(i), float(logprobs[i])) for i in idx)


def logprob_entries(
    logprobs: Logits, token: int, k: int, name: Callable[[int], str]
) -> tuple[Logprob, tuple[Logprob, ...]]:
    """The chosen token's entry and its ``k`` likeliest alternatives, each with its text."""
    chosen = Logprob(token, name(token), float(logprobs[token]))
    return chosen, tuple(Logprob(i, name(i), lp) for i, lp in top_logprobs(logprobs, k))
