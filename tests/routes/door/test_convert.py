"""The pure pieces of the HTTP doors: body → core request, and in-band stream errors."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

import pytest

from backends.core.planning import choice_params
from backends.core.request import ChatPrompt, TextPrompt
from backends.errors import GenerationFailed
from backends.types import SEED_MAX, SamplingParams, Usage
from routes.door import ids
from routes.door.convert import finish_reason, sampling_params, totals
from routes.door.fields import door_names
from routes.http.sse import sse_events
from routes.native.serving import chat_request
from routes.openai import serving as openai_serving
from schemas.anthropic import MessagesRequest
from schemas.native import ChatRequest
from schemas.openai import ChatCompletionRequest, CompletionRequest

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "Hi"}]
BOOL_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


def test_every_sampling_field_maps_and_choice_i_gets_seed_plus_i() -> None:
    body = ChatCompletionRequest.model_validate(
        {
            "messages": MESSAGES,
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 7,
            "seed": SEED_MAX,
            "min_tokens": 3,
            "repetition_penalty": 1.2,
            "presence_penalty": 0.5,
            "frequency_penalty": -0.5,
            "logit_bias": {"12": -100, "7": 2.5},
            "logprobs": True,
            "top_logprobs": 4,
            "n": 3,
            "stop": "END",
            "max_completion_tokens": 9,
        }
    )
    request = openai_serving.chat_request(body, "rid-1")
    assert isinstance(request.prompt, ChatPrompt) and request.prompt.messages == MESSAGES
    assert (request.n, request.stop, request.max_tokens, request.request_id) == (
        3,
        ["END"],
        9,
        "rid-1",
    )
    names = door_names(request.prompts, openai_serving.chat_fields(body))
    assert names("max_tokens") == "max_completion_tokens" and names("prompt") == "messages"
    params = choice_params(request, 2, max_new_tokens=8)
    assert params.seed == 1  # SEED_MAX + 2 wraps into the engine's 32-bit range
    assert params.logit_bias == {12: -100.0, 7: 2.5}
    assert (params.temperature, params.top_p, params.top_k) == (0.5, 0.9, 7)
    assert (params.min_new_tokens, params.repetition_penalty) == (3, 1.2)
    assert (params.presence_penalty, params.frequency_penalty) == (0.5, -0.5)
    assert (params.logprobs, params.top_logprobs, params.max_new_tokens) == (True, 4, 8)
    unseeded = ChatCompletionRequest.model_validate({"messages": MESSAGES})
    assert choice_params(openai_serving.chat_request(unseeded, "r"), 3, 1).seed is None


def test_completion_prompts_and_logprobs() -> None:
    body = CompletionRequest.model_validate({"prompt": ["a", "b"], "n": 2, "logprobs": 0})
    request = openai_serving.completion_request(body, "r")
    assert request.prompts == [TextPrompt("a"), TextPrompt("b")]
    assert request.choice_count == 4 and door_names(request.prompts)("prompt") == "prompt"
    assert request.sampling.logprobs and request.sampling.top_logprobs == 0


def test_native_chat_takes_the_same_sampling_fields() -> None:
    body = ChatRequest.model_validate(
        {"messages": MESSAGES, "top_k": 3, "min_tokens": 2, "seed": 5, "stop": ["x"]}
    )
    request = chat_request(body, "r")
    assert request.sampling.temperature == 0.7  # the native API's own default
    assert (request.sampling.top_k, request.sampling.min_new_tokens) == (3, 2)
    assert (request.sampling.seed, request.stop) == (5, ["x"])
    assert door_names(request.prompts)("prompt") == "messages"


def test_response_format_becomes_compact_json_guidance() -> None:
    def guidance(fmt: dict) -> tuple[str, str] | None:
        body = ChatCompletionRequest.model_validate({"messages": MESSAGES, "response_format": fmt})
        return sampling_params(body, json_schema=body.json_schema).guidance

    assert guidance({"type": "text"}) is None
    kind, schema = guidance({"type": "json_object"}) or ("", "")
    assert kind == "json_schema"
    assert json.loads(schema) == {"type": "object", "x-guidance": {"whitespace_flexible": False}}
    spec = {"name": "a", "schema": {**BOOL_SCHEMA, "x-guidance": {"whitespace_flexible": True}}}
    _, schema = guidance({"type": "json_schema", "json_schema": spec}) or ("", "")
    assert json.loads(schema)["x-guidance"] == {"whitespace_flexible": True}  # the client's wins
    assert json.loads(schema)["properties"] == BOOL_SCHEMA["properties"]


def test_a_failure_mid_stream_is_an_in_band_error_event() -> None:
    async def payloads() -> AsyncIterator[str]:
        yield '{"object": "list", "data": []}'
        raise GenerationFailed("Generation failed: boom")

    async def events_of() -> list[str]:
        return [e["data"] async for e in sse_events(payloads())]

    events = asyncio.run(events_of())
    assert json.loads(events[0]) == {"object": "list", "data": []}
    error = json.loads(events[1])["error"]
    assert error["code"] == "generation_failed" and "boom" in error["message"]
    assert len(events) == 2, "the stream ends after the error"


@pytest.mark.parametrize("key", ["²", "١٢", "x", "-1"])
def test_logit_bias_keys_are_ascii_token_ids(key: str) -> None:
    with pytest.raises(ValueError, match="token ids"):
        ChatCompletionRequest.model_validate({"messages": MESSAGES, "logit_bias": {key: 1}})


@pytest.mark.parametrize(
    ("model", "body", "param"),
    [
        (ChatCompletionRequest, {"messages": MESSAGES, "top_k": False}, "top_k"),
        (ChatCompletionRequest, {"messages": MESSAGES, "max_tokens": "5"}, "max_tokens"),
        (ChatCompletionRequest, {"messages": MESSAGES, "temperature": True}, "temperature"),
        (ChatCompletionRequest, {"messages": MESSAGES, "logprobs": 1}, "logprobs"),
        (ChatCompletionRequest, {"messages": MESSAGES, "n": 2.0}, "n"),
        (CompletionRequest, {"prompt": "x", "echo": 0}, "echo"),
        (ChatRequest, {"messages": MESSAGES, "seed": True}, "seed"),
    ],
)
def test_numbers_and_booleans_are_taken_strictly(model, body, param) -> None:
    with pytest.raises(ValueError) as exc:
        model.model_validate(body)
    assert exc.value.errors()[0]["loc"][0] == param  # type: ignore[attr-defined]


def test_an_integer_is_a_valid_float() -> None:
    body = ChatCompletionRequest.model_validate({"messages": MESSAGES, "temperature": 1})
    assert body.temperature == 1.0


def test_a_body_with_only_the_four_common_fields_samples_with_the_rest_off() -> None:
    # Anthropic's: unset top_p and top_k are no cut; no penalties, bias or min_tokens.
    body = MessagesRequest.model_validate(
        {"model": "m", "messages": MESSAGES, "max_tokens": 4, "temperature": 0.2, "seed": 9}
    )
    assert sampling_params(body) == SamplingParams(temperature=0.2, top_p=1.0, top_k=0, seed=9)


def test_usage_totals_every_door_reports() -> None:
    count = totals(Usage(prompt_tokens=10, completion_tokens=4, cached_tokens=6))
    assert (count.prompt, count.completion, count.cached) == (10, 4, 6)
    assert (count.uncached_prompt, count.total) == (4, 14)


@pytest.mark.parametrize(
    ("reason", "told"),
    [("stop", "stop"), ("length", "length"), ("tool_calls", "tool_calls"), ("cancelled", "stop")],
)
def test_a_cancelled_choice_is_told_as_a_stop(reason: str, told: str) -> None:
    assert finish_reason(reason) == told  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("prefix", "pattern"),
    [
        (ids.CHAT_COMPLETION, r"chatcmpl-[0-9a-f]{32}"),
        (ids.COMPLETION, r"cmpl-[0-9a-f]{32}"),
        (ids.RESPONSE, r"resp_[0-9a-f]{32}"),
        (ids.MESSAGE, r"msg_[0-9a-f]{32}"),
        (ids.REASONING, r"rs_[0-9a-f]{32}"),
        (ids.FUNCTION_CALL, r"fc_[0-9a-f]{32}"),
    ],
)
def test_each_protocol_keeps_its_id_format(prefix: str, pattern: str) -> None:
    made = {ids.new_id(prefix) for _ in range(3)}
    assert len(made) == 3 and all(re.fullmatch(pattern, i) for i in made)


def test_a_call_keeps_its_id_under_anthropics_prefix() -> None:
    assert ids.call_id_as(ids.TOOL_USE, "call_0a1b") == "toolu_0a1b"
    assert ids.call_id_as(ids.TOOL_USE, "xyz") == "toolu_xyz"
