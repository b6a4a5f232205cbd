"""POST /v1/responses (OpenAI's Responses API, stateless) on the real demo model: the same
generation as /v1/chat/completions in Responses' shapes, streamed and not; forced calls, a call
round trip and JSON output; what it refuses. Every body and event is also validated against the
official ``openai`` package's own models, as a client would read them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openai.types.responses import Response as SDKResponse
from openai.types.responses import ResponseStreamEvent as SDKStreamEvent
from pydantic import TypeAdapter

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.core.timing import RequestMetrics
from backends.errors import RequestTimedOut
from backends.types import GeneratedToken, Usage
from routes.responses.builder import ResponseBuilder
from schemas.responses import ResponsesRequest
from tests.conftest import METRIC_KEYS, assert_error, make_client, wait_ready

pytestmark = pytest.mark.model

ASK = "What is the weather in Paris for three days?"
EOS = 2  # the demo model's eos_token_id
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    },
    "strict": True,
}
TIME = {
    "type": "function",
    "name": "get_time",
    "parameters": {
        "type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"],
        "additionalProperties": False,
    },
}
SDK_EVENT: TypeAdapter[Any] = TypeAdapter(SDKStreamEvent)


def create(client: TestClient, **body: Any) -> dict[str, Any]:
    body.setdefault("input", ASK)
    resp = client.post("/v1/responses", json=body)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    SDKResponse.model_validate(out)  # as the official client reads it, fully validated
    return out


def stream(client: TestClient, **body: Any) -> list[dict[str, Any]]:
    """The events, checked for what every Responses stream must be."""
    body.setdefault("input", ASK)
    with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = list(resp.iter_lines())
    events, name = [], None
    for line in lines:
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            event = json.loads(line.removeprefix("data:"))
            assert event["type"] == name, "the event: line names the data's type"
            SDK_EVENT.validate_python(event)
            events.append(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert "[DONE]" not in "\n".join(lines)
    return events


def text_of(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


def calls_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "function_call"]


def chat(client: TestClient, **body: Any) -> dict[str, Any]:
    resp = client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def valid_weather(arguments: str) -> bool:
    args = json.loads(arguments)
    return (
        set(args) == {"city", "days"}
        and args["city"] in ("Paris", "Rome", "Oslo")
        and isinstance(args["days"], int)
        and 1 <= args["days"] <= 7
    )


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
    assert body["store"] is False and body["error"] is None and body["tools"] == []


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


# ---- tools -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_required_gives_one_valid_function_call(client: TestClient, seed: int) -> None:
    body = create(
        client,
        tools=[WEATHER, TIME],
        tool_choice="required",
        parallel_tool_calls=False,
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
    body = create(client, text={"format": fmt}, seed=seed, max_output_tokens=40)
    assert body["status"] == "completed"
    value = json.loads(text_of(body))
    assert value.keys() == {"colour"} and value["colour"] in ("red", "green", "blue")


def test_json_object_format_gives_an_object(client: TestClient) -> None:
    body = create(client, text={"format": {"type": "json_object"}}, seed=1, max_output_tokens=60)
    if body["status"] == "completed":
        assert isinstance(json.loads(text_of(body)), dict)
    else:  # the untrained model may keep writing keys; what it wrote is still an object so far
        assert text_of(body).startswith("{")


# ---- refused -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"store": True}, "store"),
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"background": True}, "background"),
        ({"include": ["message.output_text.logprobs"]}, "include"),
        ({"include": ["everything"]}, "include.0"),
        ({"reasoning": {"effort": "maximal"}}, "reasoning.effort"),
        ({"reasoning": {"budget": 3}}, "reasoning.budget"),
        ({"service_tier": "gold"}, "service_tier"),
        ({"client_metadatas": {}}, "client_metadatas"),  # a typo is still caught
        ({"truncation": "auto"}, "truncation"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"tools": [{"type": "local_shell"}]}, "tools.0"),
        ({"tools": [{"type": "custom", "name": "patch"}]}, "tools.0"),
        ({"tools": [WEATHER], "tool_choice": {"type": "web_search_preview"}}, "tool_choice"),
        ({"tools": [WEATHER, WEATHER]}, "tools"),  # two functions of one name
        ({"tool_choice": "required"}, "tool_choice"),  # no tools
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        (
            {
                "tools": [WEATHER],
                "tool_choice": "required",
                "text": {"format": {"type": "json_object"}},
            },
            "tool_choice",
        ),
        ({"tools": [{"type": "function", "parameters": {}}]}, "tools.0.function.name"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input.0.content.0",  # the served model reads text only
        ),
        ({"input": [{"role": "tool", "content": "x"}]}, "input.0.message.role"),
        ({"input": []}, "input"),
        ({"input": 5}, "input"),
        ({"input": [{"type": "reasoning", "summary": []}]}, "input"),
        ({"text": {"format": {"type": "xml"}}}, "text.format"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format"),
        ({"text": {"verbosity": "loud"}}, "text.verbosity"),
        ({"stream_options": {"include_obfuscation": False}}, "stream_options"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_output_tokens": 100_000}, "max_output_tokens"),  # more than the context
        ({"metadata": {str(i): "v" for i in range(17)}}, "metadata"),
        ({"messages": [{"role": "user", "content": "x"}]}, "messages"),  # not this API's
    ],
)
def test_requests_that_cannot_be_honoured_are_400_naming_the_field(
    client: TestClient, extra: dict[str, Any], param: str
) -> None:
    resp = client.post("/v1/responses", json={"input": ASK, **extra})
    assert assert_error(resp, 400)["param"].startswith(param)


def test_harmless_values_of_refused_fields_are_accepted(client: TestClient) -> None:
    body = create(
        client,
        store=False,
        include=[],
        reasoning=None,
        truncation="disabled",
        service_tier="auto",
        prompt_cache_key="k",
        safety_identifier="s",
        max_tool_calls=3,
        max_output_tokens=2,
    )
    assert body["status"] == "incomplete"


def test_an_unknown_model_is_404(client: TestClient) -> None:
    assert_error(client.post("/v1/responses", json={"input": ASK, "model": "gpt-9"}), 404)


# ---- the server ends it ------------------------------------------------------------------
def test_a_timeout_is_an_http_error_or_an_error_event_never_a_completed_response() -> None:
    with make_client(request_timeout=1e-6) as timed:
        wait_ready(timed)
        resp = timed.post("/v1/responses", json={"input": ASK, "max_output_tokens": 12})
        assert assert_error(resp, 504)["code"] == "request_timeout"
        events = stream(timed, max_output_tokens=12)
    assert [e["type"] for e in events][:2] == ["response.created", "response.in_progress"]
    error = events[-1]
    assert error["type"] == "error" and error["code"] == "request_timeout" and error["message"]
    assert not any(e["type"] in ("response.completed", "response.incomplete") for e in events)


# ---- the builder, on pieces the demo model cannot make -----------------------------------
class FakeHandle:
    model = "m"
    created = 1

    def usage(self) -> Usage:
        return Usage(10, 7, 4)

    def metrics(self) -> RequestMetrics:
        return RequestMetrics(0.1, 0.2, 0.01, 100.0, 35.0, 10, 7)


def _token(text: str) -> GeneratedToken:
    return GeneratedToken(1, text)


def test_thinking_answer_and_calls_become_items_in_order() -> None:
    body = ResponsesRequest.model_validate({"input": "hi", "tools": [TIME]})
    builder = ResponseBuilder(FakeHandle(), body)  # type: ignore[arg-type]
    pieces = [
        ChoiceDelta(0, "", _token("<think>")),
        ChoiceDelta(0, "", _token("hm"), reasoning="hm"),
        ChoiceDelta(0, "", _token(" ok"), reasoning=" ok"),
        ChoiceDelta(0, "Sure.", _token("</think>Sure.")),
        ChoiceDelta(0, "", _token("<tool_call>"), calls=(CallDelta(0, "call_a", "get_time"),)),
        ChoiceDelta(0, "", _token("{}"), calls=(CallDelta(0, arguments='{"zone": "UTC"}'),)),
        ChoiceDelta(0, "", None, finish_reason="tool_calls", last=True),
    ]
    events = [e for piece in pieces for e in builder.feed(piece)]
    response = builder.response()
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    reasoning, message, call = (item.model_dump() for item in response.output)
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "hm ok"}]
    assert message["content"][0]["text"] == "Sure."
    assert (call["call_id"], call["name"], call["arguments"]) == (
        "call_a",
        "get_time",
        '{"zone": "UTC"}',
    )
    assert response.status == "completed"
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == 3
    assert response.usage.input_tokens_details.cached_tokens == 4
    types = [e.type for e in events]
    assert types.index("response.reasoning_text.done") < types.index("response.output_text.delta")
    assert (
        types.count("response.output_item.added") == types.count("response.output_item.done") == 3
    )
    for event in events:
        SDK_EVENT.validate_python(event.model_dump(by_alias=True))
    SDKResponse.model_validate(response.model_dump(by_alias=True))


def test_an_empty_answer_is_still_a_message() -> None:
    builder = ResponseBuilder(FakeHandle(), ResponsesRequest.model_validate({"input": "hi"}))  # type: ignore[arg-type]
    events = builder.feed(ChoiceDelta(0, "", None, finish_reason="stop", last=True))
    [message] = builder.response().output
    assert message.type == "message" and message.content[0].text == ""
    assert [e.type for e in events][-1] == "response.output_item.done"


def test_an_error_event_carries_the_errors_code() -> None:
    builder = ResponseBuilder(FakeHandle(), ResponsesRequest.model_validate({"input": "hi"}))  # type: ignore[arg-type]
    builder.start()
    event = builder.error(RequestTimedOut("too slow"))
    assert (event.type, event.code, event.message, event.sequence_number) == (
        "error",
        "request_timeout",
        "too slow",
        2,
    )


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
