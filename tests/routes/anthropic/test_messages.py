"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) on the real demo model:
a message and its stream agree, stop reasons are honest (max_tokens, stop_sequence naming the
string, tool_use), forced tools give valid tool_use blocks and their results go back through
the template, count_tokens is what usage reports, and every error is in Anthropic's shape.

The stream's event order and the block bookkeeping for thinking (which the demo model cannot
produce) are checked on the FastAPI-free mapping with hand-made pieces."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.types import GeneratedToken
from routes.anthropic import serving
from schemas.anthropic import CountTokensRequest, MessagesRequest
from tests.conftest import DEMO_CONTEXT, make_client, wait_ready
from tests.routes.fakes import FakeHandle

pytestmark = pytest.mark.model

MODEL = "onnx-genai"
ASK = [{"role": "user", "content": "What is the weather in Paris for three days?"}]
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    },
}
TIME = {
    "name": "get_time",
    "input_schema": {
        "type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"],
        "additionalProperties": False,
    },
}
ONE_CALL = {"type": "any", "disable_parallel_tool_use": True}


def valid_input(name: str, args: dict[str, Any]) -> bool:
    if name == "get_weather":
        return (
            set(args) == {"city", "days"}
            and args["city"] in ("Paris", "Rome", "Oslo")
            and isinstance(args["days"], int)
            and 1 <= args["days"] <= 7
        )
    return name == "get_time" and set(args) == {"zone"} and args["zone"] in ("UTC", "CET")


def post(client: TestClient, **body: Any) -> dict[str, Any]:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 16, **body}
    resp = client.post("/v1/messages", json=body)
    assert resp.status_code == 200, resp.text
    message: dict[str, Any] = resp.json()
    return message


def sse(lines: Iterator[str]) -> list[tuple[str | None, dict[str, Any]]]:
    """(event name, data) of each event."""
    events, name, data = [], None, []
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            events.append((name, json.loads("\n".join(data))))
            name, data = None, []
    if data:
        events.append((name, json.loads("\n".join(data))))
    return events


def stream(client: TestClient, **body: Any) -> list[dict[str, Any]]:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 16, **body, "stream": True}
    with client.stream("POST", "/v1/messages", json=body) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse(resp.iter_lines())
    for name, data in events:
        assert name == data["type"], "every event is named after its type, as Anthropic's are"
    return [data for _, data in events]


def fold(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed message, put together the way the SDK does it."""
    [start] = [e for e in events if e["type"] == "message_start"]
    message = dict(start["message"], content=[])
    partial: dict[int, str] = {}
    for e in events:
        if e["type"] == "content_block_start":
            assert e["index"] == len(message["content"])
            message["content"].append(dict(e["content_block"]))
        elif e["type"] == "content_block_delta":
            block, delta = message["content"][e["index"]], e["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            else:
                partial[e["index"]] = partial.get(e["index"], "") + delta["partial_json"]
        elif e["type"] == "content_block_stop" and e["index"] in partial:
            message["content"][e["index"]]["input"] = json.loads(partial[e["index"]])
        elif e["type"] == "message_delta":
            message.update(e["delta"])
            message["usage"] = {**message["usage"], **e["usage"]}
    return message


def text_of(message: dict[str, Any]) -> str:
    return "".join(b["text"] for b in message["content"] if b["type"] == "text")


def count(client: TestClient, **body: Any) -> int:
    body = {"model": MODEL, "messages": ASK, **body}
    resp = client.post("/v1/messages/count_tokens", json=body)
    assert resp.status_code == 200, resp.text
    assert set(resp.json()) == {"input_tokens"}
    n: int = resp.json()["input_tokens"]
    return n


def prompt_tokens(message: dict[str, Any]) -> int:
    usage = message["usage"]
    return int(usage["input_tokens"] + usage["cache_read_input_tokens"])


def assert_anthropic_error(resp: Any, status: int, kind: str, *fragments: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["type"] == "error" and set(body) <= {"type", "error", "request_id"}
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == kind
    message: str = body["error"]["message"]
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---- messages and their streams ----------------------------------------------------------------
def test_a_message_and_its_stream_agree(client: TestClient) -> None:
    # A cap below the demo model's answer, which ends sooner than 12 tokens (no min_tokens
    # here to hold it back).
    message = post(client, temperature=0, max_tokens=4)
    assert message["id"].startswith("msg_")
    assert (message["type"], message["role"], message["model"]) == ("message", "assistant", MODEL)
    assert [b["type"] for b in message["content"]] == ["text"] and text_of(message)
    assert message["stop_reason"] == "max_tokens" and message["stop_sequence"] is None
    assert message["usage"]["output_tokens"] == 4
    assert message["metrics"]["output_tokens"] == 4

    events = stream(client, temperature=0, max_tokens=4)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "ping"]
    assert kinds[2] == "content_block_start" and kinds[-3] == "content_block_stop"
    assert set(kinds[3:-3]) == {"content_block_delta"}
    assert kinds[-2:] == ["message_delta", "message_stop"]
    start = events[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["output_tokens"] == 0
    streamed = fold(events)
    assert text_of(streamed) == text_of(message)
    assert streamed["stop_reason"] == "max_tokens"
    assert streamed["usage"]["output_tokens"] == 4
    assert prompt_tokens(streamed) == prompt_tokens(message)
    assert events[-2]["metrics"]["output_tokens"] == 4


def test_the_system_prompt_goes_first_through_the_template(client: TestClient) -> None:
    system = "You are terse."
    rendered = client.post(
        "/apply-template", json={"messages": [{"role": "system", "content": system}, *ASK]}
    ).json()["prompt"]
    tokenized = client.post("/tokenize", json={"prompt": rendered}).json()["count"]
    assert count(client, system=system) == tokenized > count(client)
    blocks = [{"type": "text", "text": "You are"}, {"type": "text", "text": "terse."}]
    assert count(client, system=blocks) == count(client, system="You are\nterse.")
    message = post(client, system=system, temperature=0, max_tokens=4)
    assert prompt_tokens(message) == tokenized


def _a_stop_in(text: str) -> str:
    for i in range(4, len(text) - 3):
        candidate = text[i : i + 3]
        if candidate.strip() == candidate and "\ufffd" not in candidate:
            return candidate
    raise AssertionError(f"no usable stop string in {text!r}")


def test_a_stop_sequence_is_cut_and_named(client: TestClient) -> None:
    whole = post(client, temperature=0, max_tokens=24)
    full = text_of(whole)
    stop = _a_stop_in(full)
    cut = post(client, temperature=0, max_tokens=24, stop_sequences=["never seen §§", stop])
    assert text_of(cut) == full[: full.find(stop)]
    assert (cut["stop_reason"], cut["stop_sequence"]) == ("stop_sequence", stop)
    streamed = fold(stream(client, temperature=0, max_tokens=24, stop_sequences=[stop]))
    assert text_of(streamed) == full[: full.find(stop)]
    assert (streamed["stop_reason"], streamed["stop_sequence"]) == ("stop_sequence", stop)
    # A stop sequence that never comes: the answer ends as it does without one.
    long = post(client, temperature=0, max_tokens=24, stop_sequences=["never seen §§"])
    assert (long["stop_reason"], long["stop_sequence"]) == (whole["stop_reason"], None)
    assert text_of(long) == full


# ---- tools -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
def test_tool_choice_any_gives_one_valid_tool_use(client: TestClient, seed: int) -> None:
    message = post(client, tools=[WEATHER, TIME], tool_choice=ONE_CALL, seed=seed, max_tokens=200)
    assert message["stop_reason"] == "tool_use"
    [block] = message["content"]  # the call's text is not also a text block
    assert block["type"] == "tool_use" and block["id"].startswith("toolu_")
    assert valid_input(block["name"], block["input"])


def test_a_named_tool_is_the_one_called(client: TestClient) -> None:
    choice = {"type": "tool", "name": "get_time", "disable_parallel_tool_use": True}
    for seed in range(3):
        message = post(client, tools=[WEATHER, TIME], tool_choice=choice, seed=seed, max_tokens=80)
        [block] = message["content"]
        assert block["name"] == "get_time" and valid_input("get_time", block["input"])
        assert message["stop_reason"] == "tool_use"


def test_a_forced_tool_use_streams_as_input_json_deltas(client: TestClient) -> None:
    req = {"tools": [WEATHER], "tool_choice": ONE_CALL, "seed": 1, "max_tokens": 200}
    whole = post(client, **req)
    events = stream(client, **req)
    [started] = [e for e in events if e["type"] == "content_block_start"]
    assert started["content_block"]["type"] == "tool_use"
    assert started["content_block"]["input"] == {}
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert deltas and all(d["type"] == "input_json_delta" for d in deltas)
    streamed = fold(events)
    assert [(b["name"], b["input"]) for b in streamed["content"]] == [
        (b["name"], b["input"]) for b in whole["content"]
    ]
    assert streamed["stop_reason"] == "tool_use"


def test_a_tool_use_and_its_result_go_back_through_the_template(client: TestClient) -> None:
    first = post(client, tools=[WEATHER], tool_choice=ONE_CALL, seed=2, max_tokens=200)
    [call] = first["content"]
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": '{"forecast": "sunny"}'}
    history = [
        *ASK,
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": [result]},
    ]
    answer = post(client, messages=history, tools=[WEATHER], temperature=0, max_tokens=12)
    assert answer["stop_reason"] in ("end_turn", "max_tokens") and text_of(answer)
    assert prompt_tokens(answer) > prompt_tokens(first) + 10
    assert count(client, messages=history, tools=[WEATHER]) == prompt_tokens(answer)
    # The same, in the template's own terms: an assistant tool call, then a tool message.
    openai_history = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["input"])},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": '{"forecast": "sunny"}'},
    ]
    openai_tools = [
        {
            "type": "function",
            "function": {
                "name": WEATHER["name"],
                "description": WEATHER["description"],
                "parameters": WEATHER["input_schema"],
            },
        }
    ]
    tokenized = client.post("/tokenize", json={"messages": openai_history, "tools": openai_tools})
    assert tokenized.json()["count"] == prompt_tokens(answer)
    # Text blocks as content, and an error result: the model is told it failed.
    as_blocks = {**result, "content": [{"type": "text", "text": '{"forecast": "sunny"}'}]}
    failed = {**result, "is_error": True}
    same = count(client, messages=[*history[:2], {"role": "user", "content": [as_blocks]}])
    assert same == count(client, messages=history)
    assert count(client, messages=[*history[:2], {"role": "user", "content": [failed]}]) > same


def test_tool_choice_none_hides_the_tools(client: TestClient) -> None:
    plain = post(client, temperature=0, max_tokens=6)
    none = post(client, tools=[WEATHER], tool_choice={"type": "none"}, temperature=0, max_tokens=6)
    assert prompt_tokens(none) == prompt_tokens(plain) == count(client)
    assert count(client, tools=[WEATHER], tool_choice={"type": "none"}) == count(client)
    assert text_of(none) == text_of(plain)
    offered = count(client, tools=[WEATHER])
    assert offered > count(client)
    assert prompt_tokens(post(client, tools=[WEATHER], temperature=0, max_tokens=2)) == offered


# ---- count_tokens ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"system": "Answer in French."},
        {"tools": [WEATHER, TIME]},
        {"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "get_weather"}},
        {"thinking": {"type": "disabled"}},
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]},
                {"role": "user", "content": [{"type": "text", "text": "Rivers?"}]},
            ]
        },
    ],
)
def test_count_tokens_is_what_usage_reports(client: TestClient, extra: dict[str, Any]) -> None:
    n = count(client, **extra)
    message = post(client, **extra, max_tokens=2, temperature=0)
    assert prompt_tokens(message) == n
    assert message["metrics"]["input_tokens"] == n


def test_a_repeated_prompt_reads_its_prefix_from_the_cache(client: TestClient) -> None:
    messages = [{"role": "user", "content": "A long question about rivers. " * 8}]
    post(client, messages=messages, temperature=0, max_tokens=2)
    again = post(client, messages=messages, temperature=0, max_tokens=2)
    usage = again["usage"]
    assert usage["cache_read_input_tokens"] > 0
    assert prompt_tokens(again) == count(client, messages=messages)


# ---- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        ({"max_tokens": None}, ["max_tokens", "required"]),
        ({"max_tokens": 0}, ["max_tokens"]),
        ({"temperature": 1.5}, ["temperature"]),
        ({"messages": []}, ["messages"]),
        ({"frequency_penalty": 1}, ["frequency_penalty", "not permitted"]),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            ["messages.0.content.0", "image", "source"],
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
            ["messages.0.content.0", "document", "text and images"],
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [{"type": "image"}],
                            }
                        ],
                    }
                ]
            },
            ["messages.0.content.0", "image"],
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
                    }
                ]
            },
            ["messages.0.content", "tool_use", "user turn"],
        ),
        ({"messages": [*ASK, {"role": "assistant", "content": "The"}]}, ["messages", "prefill"]),
        ({"messages": [{"role": "tool", "content": "x"}]}, ["messages.0.role"]),
        (
            {"tools": [{"type": "bash_20250124", "name": "bash"}]},
            ["tools.0", "bash_20250124"],
        ),
        (
            {"tools": [{"name": "f", "input_schema": {"type": "array"}}]},
            ["tools.0", "input_schema"],
        ),
        ({"tool_choice": {"type": "any"}}, ["tool_choice", "no tools"]),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}},
            ["tool_choice", "nope"],
        ),
        ({"tool_choice": {"type": "required"}}, ["tool_choice"]),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, ["budget_tokens", "max_tokens"]),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 100}, "max_tokens": 1500},
            ["budget_tokens"],
        ),
        ({"stop_sequences": [""]}, ["stop_sequences"]),
        (
            {"messages": [{"role": "user", "content": "go " * (DEMO_CONTEXT + 1000)}]},
            ["messages", str(DEMO_CONTEXT)],
        ),
    ],
)
def test_bad_requests_are_anthropic_400s_that_name_the_problem(
    client: TestClient, extra: dict[str, Any], fragments: list[str]
) -> None:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 16, **extra}
    body = {k: v for k, v in body.items() if v is not None}
    resp = client.post("/v1/messages", json=body)
    assert_anthropic_error(resp, 400, "invalid_request_error", *fragments)


def test_other_errors_are_anthropic_shaped_too(client: TestClient) -> None:
    body = {"model": "claude-opus-4", "messages": ASK, "max_tokens": 4}
    resp = client.post("/v1/messages", json=body)
    assert_anthropic_error(resp, 404, "not_found_error", "claude-opus-4")
    assert resp.json()["request_id"] == resp.headers["x-request-id"]
    resp = client.post(
        "/v1/messages/count_tokens", json={"model": "claude-opus-4", "messages": ASK}
    )
    assert_anthropic_error(resp, 404, "not_found_error")
    resp = client.post(
        "/v1/messages/count_tokens", json={"model": MODEL, "messages": ASK, "max_tokens": 3}
    )
    assert_anthropic_error(resp, 400, "invalid_request_error", "max_tokens")
    resp = client.post(
        "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_anthropic_error(resp, 400, "invalid_request_error", "JSON")
    assert_anthropic_error(client.get("/v1/messages"), 405, "invalid_request_error")
    assert_anthropic_error(client.post("/v1/messages/batches", json={}), 404, "not_found_error")
    # Other routes keep the one shape.
    resp = client.post("/v1/chat/completions", json={"messages": []})
    assert resp.status_code == 400 and set(resp.json()) == {"error"}


def test_a_stream_that_fails_after_it_started_ends_with_an_error_event() -> None:
    with make_client(request_timeout=1e-6) as c:
        wait_ready(c)
        events = stream(c, temperature=0, max_tokens=12)
        assert [e["type"] for e in events] == ["message_start", "ping", "error"]
        assert events[-1]["error"]["type"] == "timeout_error"
        assert "GENAI_REQUEST_TIMEOUT" in events[-1]["error"]["message"]
        resp = c.post("/v1/messages", json={"model": MODEL, "messages": ASK, "max_tokens": 12})
        assert_anthropic_error(resp, 504, "timeout_error", "GENAI_REQUEST_TIMEOUT")


def test_too_large_a_body_is_an_anthropic_413() -> None:
    with make_client(max_body_mib=0.001) as c:
        wait_ready(c)
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "x" * 4096}],
            "max_tokens": 2,
        }
        resp = c.post("/v1/messages", json=body)
        assert_anthropic_error(resp, 413, "request_too_large")
        assert c.post("/v1/completions", json=body).json()["error"]["code"] == "request_too_large"


# ---- auth --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed_client() -> Iterator[TestClient]:
    with make_client(api_key="first-key, second-key") as c:
        wait_ready(c)
        yield c


def test_x_api_key_is_accepted_as_the_key(keyed_client: TestClient) -> None:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 2}
    for headers in ({"x-api-key": "first-key"}, {"x-api-key": "second-key"}):
        assert keyed_client.post("/v1/messages", json=body, headers=headers).status_code == 200
        counted = {"model": MODEL, "messages": ASK}
        resp = keyed_client.post("/v1/messages/count_tokens", json=counted, headers=headers)
        assert resp.status_code == 200
        assert keyed_client.get("/v1/models", headers=headers).status_code == 200  # every route
    bearer = {"Authorization": "Bearer first-key"}
    assert keyed_client.post("/v1/messages", json=body, headers=bearer).status_code == 200
    for headers in ({}, {"x-api-key": "wrong"}, {"x-api-key": ""}, {"Authorization": "Bearer no"}):
        resp = keyed_client.post("/v1/messages", json=body, headers=headers)
        message = assert_anthropic_error(resp, 401, "authentication_error")
        assert ("x-api-key" in message) == (not any(headers.values()))
        assert resp.headers["www-authenticate"] == "Bearer"
        other = keyed_client.get("/v1/models", headers=headers)  # other routes: the one shape
        assert other.status_code == 401 and other.json()["error"]["code"] == "invalid_api_key"


def test_the_api_description_lists_the_routes_and_their_events(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    op = schema["paths"]["/v1/messages"]["post"]
    assert "text/event-stream" in op["responses"]["200"]["content"]
    assert op["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/AnthropicErrorResponse"
    )
    assert "/v1/messages/count_tokens" in schema["paths"]
    components = schema["components"]["schemas"]
    assert {"MessageStartEvent", "ContentBlockDeltaEvent", "MessageDeltaEvent"} <= set(components)


# ---- the mapping, without the model ------------------------------------------------------------
def token(text: str) -> GeneratedToken:
    return GeneratedToken(token_id=1, text=text)


THINK_ANSWER_CALL = [
    ChoiceDelta(0, "", token("<think>"), reasoning="Let me"),
    ChoiceDelta(0, "", token(" see"), reasoning=" see."),
    ChoiceDelta(0, "Paris", token("Paris")),
    ChoiceDelta(0, " it is.", token(" it is.")),
    ChoiceDelta(0, "", token("<tool_call>"), calls=(CallDelta(0, "call_abc", "get_time"),)),
    ChoiceDelta(0, "", token("..."), calls=(CallDelta(0, arguments='{"zone": '),)),
    ChoiceDelta(
        0,
        "",
        None,
        calls=(CallDelta(0, arguments='"UTC"}'),),
        finish_reason="tool_calls",
        last=True,
    ),
]


def _request(**extra: Any) -> MessagesRequest:
    return MessagesRequest.model_validate(
        {"model": MODEL, "messages": ASK, "max_tokens": 9, **extra}
    )


def _events(pieces: list[ChoiceDelta], **extra: Any) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        handle: Any = FakeHandle(pieces)
        return [
            json.loads(data) async for _, data in serving.stream_payloads(handle, _request(**extra))
        ]

    return asyncio.run(run())


def _whole(pieces: list[ChoiceDelta], **extra: Any) -> dict[str, Any]:
    handle: Any = FakeHandle(pieces)
    return asyncio.run(serving.message_response(handle, _request(**extra))).model_dump()


def test_thinking_text_and_tool_use_each_get_a_block_in_order() -> None:
    events = _events(THINK_ANSWER_CALL)
    assert [(e["type"], e.get("index")) for e in events] == [
        ("message_start", None),
        ("ping", None),
        ("content_block_start", 0),
        ("content_block_delta", 0),
        ("content_block_delta", 0),
        ("content_block_stop", 0),
        ("content_block_start", 1),
        ("content_block_delta", 1),
        ("content_block_delta", 1),
        ("content_block_stop", 1),
        ("content_block_start", 2),
        ("content_block_delta", 2),
        ("content_block_delta", 2),
        ("content_block_stop", 2),
        ("message_delta", None),
        ("message_stop", None),
    ]
    assert events[2]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert events[10]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_abc",
        "name": "get_time",
        "input": {},
    }
    assert events[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    # Anthropic's input_tokens leave out what was read from the cache.
    assert events[-2]["usage"] == {
        "output_tokens": 5,
        "input_tokens": 4,
        "cache_read_input_tokens": 3,
        "cache_creation_input_tokens": 0,
    }
    whole = _whole(THINK_ANSWER_CALL)
    assert whole["content"] == [
        {"type": "thinking", "thinking": "Let me see.", "signature": ""},
        {"type": "text", "text": "Paris it is."},
        {"type": "tool_use", "id": "toolu_abc", "name": "get_time", "input": {"zone": "UTC"}},
    ]
    assert fold(events)["content"] == whole["content"]
    assert whole["usage"]["input_tokens"] == 4 and whole["metrics"]["ttft"] == 0.1


def test_omitted_thinking_keeps_the_block_without_its_text() -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}
    whole = _whole(THINK_ANSWER_CALL, thinking=thinking, max_tokens=2000)
    assert whole["content"][0] == {"type": "thinking", "thinking": "", "signature": ""}


@pytest.mark.parametrize(
    ("finish", "stops", "reason", "matched"),
    [
        ("stop", [], "end_turn", None),
        ("length", [], "max_tokens", None),
        ("stop", ["zz", "b c"], "stop_sequence", "b c"),  # the core says which stop ended it
        ("stop", ["never"], "end_turn", None),  # EOS, with a stop that never came
    ],
)
def test_the_stop_reason_says_why_it_ended(
    finish: str, stops: list[str], reason: str, matched: str | None
) -> None:
    end = ChoiceDelta(0, "", token(" c d"), finish_reason=finish, stop_sequence=matched, last=True)  # type: ignore[arg-type]
    pieces = [ChoiceDelta(0, "a ", token("a ")), ChoiceDelta(0, "", token("b")), end]
    whole = _whole(pieces, stop_sequences=stops) if stops else _whole(pieces)
    assert (whole["stop_reason"], whole["stop_sequence"]) == (reason, matched)


def test_content_blocks_map_onto_the_chat_template() -> None:
    body = CountTokensRequest.model_validate(
        {
            "model": MODEL,
            "system": [
                {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
            ],
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "s"},
                        {"type": "text", "text": "Checking."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "is_error": True,
                            "content": [{"type": "text", "text": "down"}],
                        },
                        {"type": "text", "text": "And Rome?"},
                    ],
                },
            ],
            "tools": [WEATHER],
            "thinking": {"type": "disabled"},
        }
    )
    # Ids lose the door's "toolu_", so those the core made (a Mistral model's 9 characters)
    # are what the template gets back.
    assert serving.template_messages(body) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "2", "content": "Error: down"},
        {"role": "user", "content": "And Rome?"},
    ]
    prompt = serving.count_prompt(body)
    assert prompt.template_args == {"enable_thinking": False}
    assert prompt.tools == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": WEATHER["input_schema"],
            },
        }
    ]


def test_tool_choice_maps_onto_the_core() -> None:
    def mapped(choice: dict[str, Any] | None) -> tuple[str, bool]:
        extra = {"tools": [WEATHER]} | ({"tool_choice": choice} if choice else {})
        request = serving.messages_request(_request(**extra), "r")
        return request.tool_choice, request.parallel_tool_calls

    assert mapped(None) == ("auto", True)
    assert mapped({"type": "auto"}) == ("auto", True)
    assert mapped({"type": "auto", "disable_parallel_tool_use": True}) == ("auto", False)
    assert mapped({"type": "any"}) == ("required", True)
    assert mapped({"type": "tool", "name": "get_weather"}) == ("get_weather", True)
    assert mapped({"type": "none"}) == ("none", True)
    request = serving.messages_request(_request(), "r")
    assert (request.tool_choice, request.split_reasoning) == ("none", True)
    sampling = serving.messages_request(
        _request(temperature=0.5, top_p=0.9, top_k=40), "r"
    ).sampling
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.5, 0.9, 40)
