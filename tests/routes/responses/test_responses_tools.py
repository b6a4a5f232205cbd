"""POST /v1/responses on the real demo model: forced function calls (streamed as call events),
a call round trip through the template, tool_choice none, and text.format JSON output."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.routes.responses.helpers import (
    ASK,
    TIME,
    WEATHER,
    calls_of,
    chat,
    create,
    stream,
    text_of,
    valid_weather,
)

pytestmark = pytest.mark.model


# ---- tools -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_required_gives_one_valid_function_call(client: TestClient, seed: int) -> None:
    body = create(
        client,
        tools=[WEATHER, TIME],
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=1.0,
        seed=seed,
        max_output_tokens=200,
    )
    assert body["status"] == "completed"
    [call] = body["output"]  # the call's text is not also a message
    assert call["type"] == "function_call" and call["status"] == "completed"
    assert call["id"].startswith("fc_") and call["call_id"].startswith("call_")
    if call["name"] == "get_weather":
        assert valid_weather(call["arguments"])
    else:
        assert json.loads(call["arguments"])["zone"] in ("UTC", "CET")


def test_a_named_function_is_called_and_streams_as_call_events(client: TestClient) -> None:
    req = {
        "tools": [WEATHER, TIME],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
        "seed": 4,
        "max_output_tokens": 200,
    }
    [call] = calls_of(create(client, **req))
    assert call["name"] == "get_weather" and valid_weather(call["arguments"])
    events = stream(client, **req)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, delta, done, item_done = events[2:6]
    assert added["item"]["name"] == "get_weather" and added["item"]["status"] == "in_progress"
    assert added["item"]["call_id"].startswith("call_") and added["item"]["arguments"] == ""
    assert delta["delta"] == done["arguments"] == call["arguments"]
    assert done["name"] == "get_weather"
    assert item_done["item"] == {
        **added["item"],
        "arguments": call["arguments"],
        "status": "completed",
    }
    assert calls_of(events[-1]["response"])[0]["arguments"] == call["arguments"]


def test_a_call_and_its_output_go_back_through_the_template(client: TestClient) -> None:
    first = create(
        client,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        seed=2,
        max_output_tokens=200,
    )
    [call] = calls_of(first)
    # The client sends the output back as is, then the call's result.
    items = [
        {"role": "user", "content": ASK},
        *first["output"],
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"},
    ]
    answer = create(client, input=items, tools=[WEATHER], temperature=0, max_output_tokens=10)
    assert text_of(answer)
    # The same conversation through Chat Completions: the same prompt, the same answer.
    same = chat(
        client,
        messages=[
            {"role": "user", "content": ASK},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call["call_id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call["call_id"], "content": "sunny"},
        ],
        tools=[{"type": "function", "function": {k: v for k, v in WEATHER.items() if k != "type"}}],
        temperature=0,
        max_tokens=10,
    )
    assert answer["usage"]["input_tokens"] == same["usage"]["prompt_tokens"]
    assert text_of(answer) == same["choices"][0]["message"]["content"]
    without = create(client, tools=[WEATHER], temperature=0, max_output_tokens=1)
    assert answer["usage"]["input_tokens"] > without["usage"]["input_tokens"] + 10


def test_none_offers_no_tools(client: TestClient) -> None:
    plain = create(client, temperature=0, max_output_tokens=4)
    none = create(client, tools=[WEATHER], tool_choice="none", temperature=0, max_output_tokens=4)
    offered = create(client, tools=[WEATHER], temperature=0, max_output_tokens=4)
    assert none["usage"]["input_tokens"] == plain["usage"]["input_tokens"]
    assert offered["usage"]["input_tokens"] > plain["usage"]["input_tokens"]


# ---- text.format -----------------------------------------------------------------------
COLOUR = {
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}},
    "required": ["colour"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("seed", range(3))
def test_json_schema_format_gives_matching_json(client: TestClient, seed: int) -> None:
    fmt = {"type": "json_schema", "name": "colour", "schema": COLOUR, "strict": True}
    body = create(client, text={"format": fmt}, temperature=1.0, seed=seed, max_output_tokens=40)
    assert body["status"] == "completed"
    value = json.loads(text_of(body))
    assert value.keys() == {"colour"} and value["colour"] in ("red", "green", "blue")


def test_json_object_format_gives_an_object(client: TestClient) -> None:
    body = create(client, text={"format": {"type": "json_object"}}, seed=1, max_output_tokens=60)
    if body["status"] == "completed":
        assert isinstance(json.loads(text_of(body)), dict)
    else:  # the untrained model may keep writing keys; what it wrote is still an object so far
        assert text_of(body).startswith("{")
