"""Contract: the official ``openai`` client's Responses API (``client.responses``) against a live
server process (main_genai.py): plain and streamed responses, a function tool called, streamed
and answered, structured output, and the 400s of what it cannot do. Stored responses:
test_stored_contract.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import openai
import pytest
from openai import OpenAI
from openai.types.responses import (
    FunctionToolParam,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInputParam,
    ResponseOutputItemAddedEvent,
    ResponseTextDeltaEvent,
)
from pydantic import BaseModel

from bench.harness.server import live_server

pytestmark = pytest.mark.live

KEY = "responses-contract-key"
MODEL = "onnx-genai"
ASK = "What is the weather in Paris?"
WEATHER: FunctionToolParam = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


@pytest.fixture(scope="module")
def api() -> Iterator[OpenAI]:
    with live_server(GENAI_API_KEY=KEY) as server:
        yield OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=60)


def test_a_response_and_its_stream_agree(api: OpenAI) -> None:
    more = {"min_tokens": 12}  # the demo model would end its turn before the limit
    done = api.responses.create(
        model=MODEL, input=ASK, temperature=0, max_output_tokens=12, extra_body=more
    )
    assert done.object == "response" and done.id.startswith("resp_")
    assert done.status == "incomplete"
    assert done.incomplete_details is not None
    assert done.incomplete_details.reason == "max_output_tokens"
    assert done.output_text  # the SDK's convenience property, from the message item
    assert done.usage is not None and done.usage.output_tokens == 12
    assert done.usage.input_tokens_details.cached_tokens >= 0
    assert done.model_extra is not None and done.model_extra["metrics"]["output_tokens"] == 12

    events = list(
        api.responses.create(
            model=MODEL,
            input=ASK,
            temperature=0,
            max_output_tokens=12,
            stream=True,
            extra_body=more,
        )
    )
    assert isinstance(events[0], ResponseCreatedEvent)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if isinstance(e, ResponseTextDeltaEvent)]
    assert "".join(deltas) == done.output_text
    last = events[-1]
    assert isinstance(last, ResponseIncompleteEvent)
    assert last.response.output_text == done.output_text
    assert last.response.usage is not None and last.response.usage.output_tokens == 12


def test_a_forced_function_call_streams_and_round_trips(api: OpenAI) -> None:
    asked: ResponseInputParam = [{"role": "user", "content": ASK}]
    done = api.responses.create(
        model=MODEL,
        input=asked,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        extra_body={"seed": 3},
        max_output_tokens=80,
    )
    assert done.status == "completed"
    [call] = done.output
    assert isinstance(call, ResponseFunctionToolCall)
    assert call.name == "get_weather" and json.loads(call.arguments)["city"] in ("Paris", "Rome")

    # The stream helper: typed events, and the final response with the arguments parsed.
    with api.responses.stream(
        model=MODEL,
        input=asked,
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        extra_body={"seed": 3},
        max_output_tokens=80,
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    added = [e for e in events if isinstance(e, ResponseOutputItemAddedEvent)]
    assert added and added[0].item.type == "function_call"
    [args_done] = [e for e in events if isinstance(e, ResponseFunctionCallArgumentsDoneEvent)]
    assert (
        added[0].item.name == "get_weather"
    )  # (the done event's name is ours: not in the SDK's type)
    assert args_done.model_dump().get("name") == "get_weather"
    assert isinstance(events[-1], ResponseCompletedEvent)
    [streamed] = final.output
    assert streamed.type == "function_call"
    assert streamed.arguments == args_done.arguments
    assert streamed.parsed_arguments == json.loads(args_done.arguments)  # a strict tool

    # The output goes back as it came, with the call's result.
    answer = api.responses.create(
        model=MODEL,
        input=[
            *asked,
            *done.output,  # type: ignore[list-item]
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
        tools=[WEATHER],
        temperature=0,
        max_output_tokens=8,
    )
    assert answer.output_text
    assert answer.usage is not None and done.usage is not None
    assert answer.usage.input_tokens > done.usage.input_tokens


class Colour(BaseModel):
    colour: Literal["red", "green", "blue"]


def test_structured_output_parses(api: OpenAI) -> None:
    for seed in (1, 2):
        parsed = api.responses.parse(
            model=MODEL,
            input="Pick a colour.",
            text_format=Colour,
            max_output_tokens=40,
            temperature=1.0,
            extra_body={"seed": seed},
        )
        assert isinstance(parsed.output_parsed, Colour)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"conversation": "conv_123"}, "conversation"),
        ({"tools": [{"type": "local_shell"}]}, "tools"),
    ],
)
def test_what_this_server_cannot_do_is_a_bad_request(
    api: OpenAI, extra: dict[str, Any], field: str
) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        api.responses.create(model=MODEL, input=ASK, max_output_tokens=4, **extra)
    assert field in str(bad.value)


def test_an_unknown_model_is_not_found(api: OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        api.responses.create(model="gpt-9", input=ASK)
