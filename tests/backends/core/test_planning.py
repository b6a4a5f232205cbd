from __future__ import annotations

import pytest

from backends.core.planning import plan_max_new_tokens
from backends.errors import ContextLengthExceeded

pytestmark = pytest.mark.unit


def test_default_is_capped_to_the_room_left() -> None:
    assert plan_max_new_tokens(100, None, 256, 2048) == 256
    assert plan_max_new_tokens(2000, None, 256, 2048) == 48


def test_explicit_request_that_fits_is_kept() -> None:
    assert plan_max_new_tokens(100, 1948, 256, 2048) == 1948


def test_explicit_request_that_overflows_is_refused_with_counts() -> None:
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(100, 1949, 256, 2048)
    msg = str(exc.value)
    assert "2048" in msg and "100" in msg and "1949" in msg and "2049" in msg
    assert exc.value.param == "max_tokens"


@pytest.mark.parametrize("prompt", [2048, 3000])
def test_prompt_filling_the_context_is_refused(prompt: int) -> None:
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(prompt, None, 256, 2048)
    assert str(prompt) in str(exc.value)
    assert exc.value.param == "messages"


def test_errors_name_the_door_s_fields() -> None:
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(10, 50, 256, 40, prompt_param="prompt", tokens_param="max_new_tokens")
    assert exc.value.param == "max_new_tokens" and "Reduce max_new_tokens or the prompt" in str(
        exc.value
    )
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(40, None, 256, 40, prompt_param="prompt")
    assert exc.value.param == "prompt" and "Shorten the prompt" in str(exc.value)


def test_fit_reduces_an_explicit_request_to_the_room_left() -> None:
    """Anthropic's Messages: a max_tokens beyond the room left is reduced to it."""
    assert plan_max_new_tokens(100, 32000, 256, 2048, fit=True) == 1948
    assert plan_max_new_tokens(100, 1000, 256, 2048, fit=True) == 1000
    with pytest.raises(ContextLengthExceeded):  # no room at all is still refused
        plan_max_new_tokens(2048, 32000, 256, 2048, fit=True)
