"""POST /v1/responses (OpenAI's Responses API, stateless) on the real demo model: the same
generation as /v1/chat/completions in Responses' shapes, streamed and not, and what the API
description lists. Every body and event is also validated against the official ``openai``
package's own models, as a client would read them.

Tools and JSON output are in test_responses_tools.py, what it refuses in
test_responses_errors.py, the builder on hand-made pieces in test_responses_builder.py."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import METRIC_KEYS
from tests.routes.responses.helpers import ASK, WEATHER, chat, create, stream, text_of

pytestmark = pytest.mark.model


# ---- plain input -----------------------------------------------------------------------
def test_a_string_input_is_the_chat_completion_in_responses_shape(client: TestClient) -> None:
    # min_tokens: the demo model would end its turn before the limit.
    body = create(client, input=ASK, temperature=0, max_output_tokens=12, min_tokens=12)
    same = chat(
        client,
        messages=[{"role": "user", "content": ASK}],
        temperature=0,
        max_tokens=12,
        min_tokens=12,
    )
    assert body["id"].startswith("resp_") and body["object"] == "response"
    assert body["model"] == "onnx-genai" and body["created_at"] > 0
    # Cut at the limit: incomplete, as OpenAI reports it.
    assert body["status"] == "incomplete" and body["completed_at"] is None
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    [message] = body["output"]
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["id"].startswith("msg_") and message["status"] == "incomplete"
    assert text_of(body) == same["choices"][0]["message"]["content"]
    usage = body["usage"]
    assert usage["input_tokens"] == same["usage"]["prompt_tokens"]
    assert usage["output_tokens"] == 12
    assert usage["total_tokens"] == usage["input_tokens"] + 12
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}
    assert set(usage["input_tokens_details"]) == {"cached_tokens", "cache_write_tokens"}
    assert set(body["metrics"]) == METRIC_KEYS and body["metrics"]["output_tokens"] == 12
    assert body["store"] is True and body["previous_response_id"] is None
    assert body["error"] is None and body["tools"] == []


def test_the_stream_builds_the_same_response(client: TestClient) -> None:
    req = {"input": ASK, "temperature": 0, "max_output_tokens": 12, "min_tokens": 12}
    whole = create(client, **req)
    events = stream(client, **req)
    types = [e["type"] for e in events]
    assert types[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.incomplete",  # OpenAI's end for a response cut at max_output_tokens
    ]
    assert set(types[4:-4]) == {"response.output_text.delta"}
    created = events[0]["response"]
    assert created["status"] == "in_progress" and created["output"] == []
    assert created["usage"] is None and created["metrics"] is None
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == text_of(whole)
    assert events[-4]["text"] == deltas
    item_id = events[2]["item"]["id"]
    assert all(e["item_id"] == item_id for e in events[3:-2])
    last = events[-1]["response"]
    assert last["id"] == created["id"] and last["status"] == "incomplete"
    assert text_of(last) == text_of(whole)
    # Equal usage, but for the prompt tokens reused from an earlier request's cache.
    usage, expected = dict(last["usage"]), dict(whole["usage"])
    for u in (usage, expected):
        assert 0 <= u.pop("input_tokens_details")["cached_tokens"] <= u["input_tokens"]
    assert usage == expected
    assert set(last["metrics"]) == METRIC_KEYS


def test_a_response_that_ends_by_itself_is_completed(client: TestClient) -> None:
    # EOS is likeliest by far once allowed: the model stops after min_tokens.
    req = {"temperature": 0, "max_output_tokens": 12, "min_tokens": 3, "logit_bias": {"2": 100}}
    body = create(client, **req)
    assert body["status"] == "completed" and body["incomplete_details"] is None
    assert body["completed_at"] >= body["created_at"]
    assert body["output"][0]["status"] == "completed" and body["usage"]["output_tokens"] == 3
    events = stream(client, **req)
    assert events[-1]["type"] == "response.completed"
    assert text_of(events[-1]["response"]) == text_of(body)


def test_instructions_are_a_leading_system_message(client: TestClient) -> None:
    system = "You answer in one word."
    body = create(client, instructions=system, temperature=0, max_output_tokens=8)
    same = chat(
        client,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": ASK}],
        temperature=0,
        max_tokens=8,
    )
    assert body["usage"]["input_tokens"] == same["usage"]["prompt_tokens"]
    assert text_of(body) == same["choices"][0]["message"]["content"]
    assert body["instructions"] == system
    plain = create(client, temperature=0, max_output_tokens=1)
    assert body["usage"]["input_tokens"] != plain["usage"]["input_tokens"]


def test_message_items_with_parts_render_like_chat_messages(client: TestClient) -> None:
    items = [
        {"role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello.", "annotations": []}],
        },
        {"role": "user", "content": ASK},
    ]
    body = create(client, input=items, temperature=0, max_output_tokens=6)
    same = chat(
        client,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": ASK},
        ],
        temperature=0,
        max_tokens=6,
    )
    assert body["usage"]["input_tokens"] == same["usage"]["prompt_tokens"]
    assert text_of(body) == same["choices"][0]["message"]["content"]


def test_reasoning_items_sent_back_are_accepted_and_not_shown(client: TestClient) -> None:
    thought = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "The user wants weather."}],
        "status": "completed",
    }
    user = {"role": "user", "content": ASK}
    with_it = create(client, input=[thought, user], temperature=0, max_output_tokens=1)
    without = create(client, input=[user], temperature=0, max_output_tokens=1)
    assert with_it["usage"]["input_tokens"] == without["usage"]["input_tokens"]


def test_metadata_tools_and_format_are_echoed(client: TestClient) -> None:
    fmt = {"type": "json_schema", "name": "x", "schema": {"type": "object"}, "strict": True}
    body = create(
        client,
        max_output_tokens=2,
        metadata={"ticket": "42"},
        tools=[WEATHER],
        tool_choice="none",
        parallel_tool_calls=False,
        text={"format": fmt},
        user="u1",
    )
    assert body["metadata"] == {"ticket": "42"} and body["user"] == "u1"
    assert body["tools"][0]["name"] == "get_weather" and body["tool_choice"] == "none"
    assert body["parallel_tool_calls"] is False
    assert body["text"]["format"]["schema"] == {"type": "object"}


def test_the_openapi_document_lists_the_route_and_its_events(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert "post" in schema["paths"]["/v1/responses"]
    components = schema["components"]["schemas"]
    for name in (
        "ResponsesRequest",
        "ResponsesResponse",
        "ResponseCompletedEvent",
        "ResponseErrorEvent",
    ):
        assert name in components
    stream_doc = schema["paths"]["/v1/responses"]["post"]["responses"]["200"]["content"]
    assert "text/event-stream" in stream_doc and "application/json" in stream_doc
