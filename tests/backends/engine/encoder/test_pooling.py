"""Pooling, normalisation, Matryoshka truncation and batch grouping: pure functions."""

from __future__ import annotations

import numpy as np
import pytest

from backends.engine.encoder.pooling import normalized, pool, shortened
from backends.engine.encoder.tokenize import Encoded
from backends.engine.encoder.worker import Work, batches

pytestmark = pytest.mark.unit

HIDDEN = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
MASK = np.array([[1, 1, 1], [1, 1, 0]], dtype=np.int64)


def test_mean_ignores_padding() -> None:
    assert pool(HIDDEN, MASK, "mean").tolist() == [[2.0, 3.0], [7.0, 8.0]]


def test_cls_and_last_token() -> None:
    assert pool(HIDDEN, MASK, "cls").tolist() == [[0.0, 1.0], [6.0, 7.0]]
    assert pool(HIDDEN, MASK, "last").tolist() == [[4.0, 5.0], [8.0, 9.0]]


def test_normalise_and_shorten() -> None:
    v = np.array([3.0, 4.0, 12.0], dtype=np.float32)
    assert normalized(v[None])[0].tolist() == pytest.approx([3 / 13, 4 / 13, 12 / 13])
    assert shortened(v, 2, normalize=True).tolist() == pytest.approx([0.6, 0.8])
    assert shortened(v, 2, normalize=False).tolist() == [3.0, 4.0]
    assert shortened(v, None, normalize=True) is v
    assert normalized(np.zeros((1, 3), dtype=np.float32)).tolist() == [[0.0, 0.0, 0.0]]


def work(n: int) -> Work:
    return Work(Encoded(list(range(n))))


def test_batches_group_by_length_within_the_token_budget() -> None:
    works = [work(n) for n in (30, 2, 31, 3, 100, 4)]
    groups = batches(works, budget=64, max_rows=8)
    assert [[w.length for w in g] for g in groups] == [[2, 3, 4], [30, 31], [100]]
    for g in groups[:-1]:
        assert len(g) * max(w.length for w in g) <= 64
    assert [len(g) for g in batches([work(1)] * 10, budget=1000, max_rows=4)] == [4, 4, 2]
