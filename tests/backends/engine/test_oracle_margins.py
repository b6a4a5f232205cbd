"""The near-tie comparison with og's greedy answer (oracle_margins.py), on made-up logits: it
passes a token that trails og's by little and fails one that trails by much, goes on comparing
after a near-tie, caps how many a row may have, and is exact for float models."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from config.settings import REPO_ROOT
from tests.backends.engine.oracle_margins import (
    STOP,
    TOLERANCE,
    Follow,
    Step,
    assert_near_tie,
    tolerance_for,
)

pytestmark = pytest.mark.unit

EOS = 0
# og's logits at each position of a four-token answer (a toy oracle: they do not depend on the
# tokens before). Token 1 wins every step; at position 2 token 2 trails it by 0.05 (a near-tie),
# token 3 by 2.0 (a real difference); end-of-sequence trails by 1.0 at position 3.
TABLE = [
    [-5.0, 3.0, 0.0, 0.0],
    [-5.0, 3.0, 0.0, 0.0],
    [-5.0, 3.0, 2.95, 1.0],
    [2.0, 3.0, 0.0, 0.0],
]


def toy(table: list[list[float]]) -> Follow:
    def follow(forced: Sequence[int]) -> list[Step]:
        steps = []
        for k, row in enumerate(table):
            logits = np.asarray(row, dtype=np.float32)
            token = forced[k] if k < len(forced) else int(np.argmax(logits))
            steps.append(Step(STOP if token == EOS else token, logits, (EOS,)))
            if steps[-1].token == STOP:
                break
        return steps

    return follow


def test_og_s_own_answer_passes_with_no_near_tie() -> None:
    assert assert_near_tie([1, 1, 1, 1], toy(TABLE), TOLERANCE) == []


def test_a_token_trailing_by_little_passes_as_a_near_tie() -> None:
    ties = assert_near_tie([1, 1, 2, 1], toy(TABLE), TOLERANCE)
    assert [k for k, _ in ties] == [2] and ties[0][1] == pytest.approx(0.05, abs=1e-5)


def test_a_token_trailing_by_much_fails() -> None:
    with pytest.raises(AssertionError, match="token 2 is 3 where og picks 1, by 2.0000"):
        assert_near_tie([1, 1, 3, 1], toy(TABLE), TOLERANCE)


def test_the_comparison_goes_on_after_a_near_tie() -> None:
    # og is re-anchored on the engine's tokens: a wrong token later still fails.
    with pytest.raises(AssertionError, match="token 3 is 2 where og picks 1"):
        assert_near_tie([1, 1, 2, 2], toy(TABLE), TOLERANCE)


def test_an_end_trailing_by_much_fails_and_by_little_passes() -> None:
    with pytest.raises(AssertionError, match=f"token 3 is {STOP} where og picks 1, by 1.0000"):
        assert_near_tie([1, 1, 1, STOP], toy(TABLE), TOLERANCE)
    close = [*TABLE[:3], [2.9, 3.0, 0.0, 0.0]]
    assert assert_near_tie([1, 1, 1, STOP], toy(close), TOLERANCE)[0][0] == 3


def test_an_answer_cut_short_fails() -> None:
    with pytest.raises(AssertionError, match="3 tokens where og has 4"):
        assert_near_tie([1, 1, 1], toy(TABLE), TOLERANCE)


def test_a_row_of_near_ties_fails() -> None:
    # Every step a near-tie, the engine always on the runner-up: not an engine that agrees.
    ties = [[-5.0, 3.0, 2.95, 0.0]] * 4
    with pytest.raises(AssertionError, match="2 near-ties in 4 tokens"):
        assert_near_tie([2, 2, 2, 2], toy(ties), TOLERANCE)


def test_a_float_model_is_held_exact() -> None:
    with pytest.raises(AssertionError, match="exact model"):
        assert_near_tie([1, 1, 2, 1], toy(TABLE), None)


@pytest.mark.parametrize(
    ("name", "tolerance"),
    [("demo-fp32", None), ("qwen2-fp32", None), ("qwen2", TOLERANCE), ("demo-lora", TOLERANCE)],
)
def test_only_quantized_models_get_the_tolerance(name: str, tolerance: float | None) -> None:
    assert tolerance_for(REPO_ROOT / "tests" / "models" / name) == tolerance
