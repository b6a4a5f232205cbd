from __future__ import annotations

import pytest

from backends.core.planning import plan_max_new_tokens, with_model_defaults
from backends.core.request import GenerationRequest, TextPrompt
from backends.errors import ContextLengthExceeded, Field
from backends.models.sampling import DEFAULTED_FIELDS, SamplingDefaults
from backends.types import SamplingParams

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
    assert exc.value.param == "prompt"


def test_a_slot_shorter_than_the_model_s_context_names_the_setting_to_raise() -> None:
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(3000, None, 256, 2048, model_length=8192)
    msg = str(exc.value)
    assert "3000" in msg and "2048" in msg and "8192" in msg
    assert "GENAI_KV_CACHE_MIB" in msg and "GENAI_MAX_CONCURRENCY" in msg
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(100, 2000, 256, 2048, model_length=8192)
    assert str(exc.value).startswith("This server holds at most 2048 tokens")
    assert "GENAI_KV_CACHE_MIB" in str(exc.value)
    with pytest.raises(ContextLengthExceeded) as exc:  # the model's own context: no setting
        plan_max_new_tokens(3000, None, 256, 2048, model_length=2048)
    assert "GENAI_KV_CACHE_MIB" not in str(exc.value)


def test_errors_name_the_core_s_fields_and_a_door_renames_them() -> None:
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(10, 50, 256, 40)
    assert exc.value.param == "max_tokens" and isinstance(exc.value.param, Field)
    assert "Reduce max_tokens or the prompt." in exc.value.message
    door = {"max_tokens": "max_new_tokens", "prompt": "messages"}
    told = exc.value.renamed(lambda name: door.get(name, name))
    assert type(told) is ContextLengthExceeded and told.code == "context_length_exceeded"
    assert (
        told.param == "max_new_tokens" and "Reduce max_new_tokens or the messages." in told.message
    )
    with pytest.raises(ContextLengthExceeded) as exc:
        plan_max_new_tokens(40, None, 256, 40)
    told = exc.value.renamed(lambda name: door.get(name, name))
    assert told.param == "messages" and "Shorten the messages." in told.message


def test_fit_reduces_an_explicit_request_to_the_room_left() -> None:
    """Anthropic's Messages: a max_tokens beyond the room left is reduced to it."""
    assert plan_max_new_tokens(100, 32000, 256, 2048, fit=True) == 1948
    assert plan_max_new_tokens(100, 1000, 256, 2048, fit=True) == 1000
    with pytest.raises(ContextLengthExceeded):  # no room at all is still refused
        plan_max_new_tokens(2048, 32000, 256, 2048, fit=True)


# ---- the model's sampling defaults -------------------------------------------------------
MODEL_SAMPLES = SamplingDefaults(temperature=0.6, top_p=0.95, top_k=20, repetition_penalty=1.1)


def test_only_the_fields_the_client_left_out_take_the_models_defaults() -> None:
    door = SamplingParams(temperature=1.0, top_p=1.0, top_k=0, seed=3)
    request = GenerationRequest(TextPrompt("hi"), door, unset=frozenset({"top_k", "top_p"}))
    filled = with_model_defaults(request, MODEL_SAMPLES)
    # An explicit temperature 1.0 (the door's default, too) is the client's: it wins.
    assert filled.sampling == SamplingParams(temperature=1.0, top_p=0.95, top_k=20, seed=3)
    assert filled.unset == frozenset()


def test_a_request_that_sets_nothing_gets_every_default() -> None:
    request = GenerationRequest(TextPrompt("hi"), SamplingParams(1.0), unset=DEFAULTED_FIELDS)
    s = with_model_defaults(request, MODEL_SAMPLES).sampling
    assert (s.temperature, s.top_p, s.top_k, s.repetition_penalty) == (0.6, 0.95, 20, 1.1)
    greedy = with_model_defaults(request, SamplingDefaults()).sampling
    assert greedy.greedy and greedy.top_k == 0 and greedy.top_p == 1.0


def test_beam_search_keeps_its_own() -> None:
    beams = SamplingParams(num_beams=4)
    request = GenerationRequest(TextPrompt("hi"), beams, unset=DEFAULTED_FIELDS)
    assert with_model_defaults(request, MODEL_SAMPLES).sampling == beams


def test_only_sampling_fields_have_model_defaults() -> None:
    with pytest.raises(ValueError, match="seed"):
        GenerationRequest(TextPrompt("hi"), unset=frozenset({"seed"}))
