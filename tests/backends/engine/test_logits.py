from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from backends.engine.logits import log_softmax, min_p_cut, process_logits, top_logprobs
from backends.types import GenerationParams

pytestmark = pytest.mark.unit


def params(**kw) -> GenerationParams:
    return GenerationParams(max_new_tokens=8, **kw)


def test_bias_penalties_and_min_tokens() -> None:
    logits = np.zeros((1, 1, 6), dtype=np.float32)
    p = params(
        logit_bias={1: 5.0, 2: -100.0},
        presence_penalty=0.5,
        frequency_penalty=0.25,
        min_new_tokens=3,
    )
    out = process_logits(logits, p, Counter({3: 2, 4: 1}), [5], suppress_eos=True)
    assert out.shape == (6,)
    assert out[1] == 5.0 and out[2] == -100.0
    assert out[3] == pytest.approx(-(0.5 + 0.25 * 2))
    assert out[4] == pytest.approx(-(0.5 + 0.25))
    assert out[5] == -np.inf and out[0] == 0.0
    assert logits.sum() == 0  # the input is not modified


def test_eos_allowed_once_min_tokens_reached() -> None:
    p = params(min_new_tokens=2)
    out = process_logits(np.zeros(4, np.float32), p, Counter(), [3], suppress_eos=False)
    assert out[3] == 0.0


def test_log_softmax_normalises() -> None:
    lp = log_softmax(np.array([1.0, 2.0, 3.0], np.float32))
    assert math.isclose(float(np.exp(lp).sum()), 1.0, rel_tol=1e-5)
    assert lp[2] == pytest.approx(3 - math.log(math.e + math.e**2 + math.e**3), abs=1e-5)


def test_log_softmax_with_banned_tokens() -> None:
    lp = log_softmax(np.array([0.0, -np.inf, 0.0], np.float32))
    assert lp[1] == -np.inf and lp[0] == pytest.approx(math.log(0.5))


def test_top_logprobs_order() -> None:
    lp = np.log(np.array([0.1, 0.5, 0.15, 0.25], np.float32))
    top = top_logprobs(lp, 3)
    assert [t for t, _ in top] == [1, 3, 2]
    assert top[0][1] == pytest.approx(math.log(0.5))
    assert top_logprobs(lp, 0) == ()


def test_min_p_cut_masks_what_min_p_leaves_out_at_the_temperature() -> None:
    row = np.log(np.asarray([0.40, 0.25, 0.20, 0.10, 0.05], dtype=np.float32))
    cut = row.copy()
    min_p_cut(cut, 0.45, 1.0)
    assert np.isneginf(cut).tolist() == [False, False, False, True, True]
    assert np.array_equal(cut[:3], row[:3])  # the kept tokens are untouched
    hot = row.copy()
    min_p_cut(hot, 0.45, 2.0)
    assert np.isneginf(hot).tolist() == [False, False, False, False, True]
    masked = np.asarray([-np.inf, 1.0, 0.9, -5.0], dtype=np.float32)  # the likeliest allowed
    min_p_cut(masked, 0.5, 1.0)
    assert np.isneginf(masked).tolist() == [True, False, False, True]
