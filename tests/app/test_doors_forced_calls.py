"""Forced tool calls end the generation, through every door that takes tools (OpenAI's chat
completions, the Responses API, Anthropic's Messages; each streamed and not), on the batch and
generator schedulers (issue 17).

A forced single call (required with parallel calls off, a named tool, Anthropic's
disable_parallel_tool_use, a named Responses function) ends where the grammar ends: the
door's tool-call finish, one valid call, and no token spent after it. ``min_tokens`` (where
the door has it) holds EOS back, so the end comes from the grammar, not from the model. With
parallel calls, a call is followed only by another call or the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.app.test_doors import EOS, Doors, _sse, open_doors
from tests.conftest import DirectGenerator

pytestmark = pytest.mark.model

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"],
}
OPENAI_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": CITY}}
CALL_BUDGET = 300  # far more than one call takes


@dataclass(frozen=True)
class Calls:
    finish: str  # the door's own word
    names: list[str]
    arguments: list[dict[str, Any]]
    tokens: int


def _openai_calls(d: Doors, req: dict[str, Any], stream: bool) -> Calls:
    body = {"messages": d.messages, "tools": [OPENAI_TOOL], **req}
    if not stream:
        resp = d.client.post("/v1/chat/completions", json=body)
        assert resp.status_code == 200, resp.text
        [choice] = resp.json()["choices"]
        calls = [c["function"] for c in choice["message"]["tool_calls"] or []]
        assert not choice["message"]["content"]
        used = resp.json()["usage"]["completion_tokens"]
    else:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        chunks = _sse(d.client, "/v1/chat/completions", body)
        parts = [c["choices"][0] for c in chunks if c.get("choices")]
        assert not "".join(p["delta"].get("content") or "" for p in parts)
        by_index: dict[int, dict[str, str]] = {}
        for p in parts:
            for delta in p["delta"].get("tool_calls") or []:
                call = by_index.setdefault(delta["index"], {"name": "", "arguments": ""})
                call["name"] += delta.get("function", {}).get("name") or ""
                call["arguments"] += delta.get("function", {}).get("arguments") or ""
        calls = [by_index[i] for i in sorted(by_index)]
        choice = parts[-1]
        used = chunks[-1]["usage"]["completion_tokens"]
    return Calls(
        choice["finish_reason"],
        [c["name"] for c in calls],
        [json.loads(c["arguments"]) for c in calls],
        used,
    )


def _responses_calls(d: Doors, req: dict[str, Any], stream: bool) -> Calls:
    tool = {"type": "function", "name": "get_weather", "parameters": CITY}
    body = {"input": d.messages, "tools": [tool], **req}
    body["max_output_tokens"] = body.pop("max_tokens")
    if stream:
        events = _sse(d.client, "/v1/responses", {**body, "stream": True})
        response = events[-1]["response"]
    else:
        resp = d.client.post("/v1/responses", json=body)
        assert resp.status_code == 200, resp.text
        response = resp.json()
    calls = [item for item in response["output"] if item["type"] == "function_call"]
    assert all(item["type"] == "function_call" for item in response["output"])
    return Calls(
        response["status"],
        [c["name"] for c in calls],
        [json.loads(c["arguments"]) for c in calls],
        response["usage"]["output_tokens"],
    )


def _anthropic_calls(d: Doors, req: dict[str, Any], stream: bool) -> Calls:
    tool = {"name": "get_weather", "input_schema": CITY}
    body = {"model": "onnx-genai", "messages": d.messages, "tools": [tool], **req}
    if stream:
        events = _sse(d.client, "/v1/messages", {**body, "stream": True})
        starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
        assert all(b["type"] == "tool_use" for b in starts)
        inputs: dict[int, str] = {}
        for e in events:
            if e["type"] == "content_block_delta":
                assert e["delta"]["type"] == "input_json_delta"
                inputs[e["index"]] = inputs.get(e["index"], "") + e["delta"]["partial_json"]
        [end] = [e for e in events if e["type"] == "message_delta"]
        return Calls(
            end["delta"]["stop_reason"],
            [b["name"] for b in starts],
            [json.loads(inputs[i]) for i in sorted(inputs)],
            end["usage"]["output_tokens"],
        )
    resp = d.client.post("/v1/messages", json=body)
    assert resp.status_code == 200, resp.text
    message = resp.json()
    assert all(b["type"] == "tool_use" for b in message["content"])
    return Calls(
        message["stop_reason"],
        [b["name"] for b in message["content"]],
        [b["input"] for b in message["content"]],
        message["usage"]["output_tokens"],
    )


NAMED = {"type": "function", "function": {"name": "get_weather"}}
FORCED_ONE_CALL: dict[str, tuple[Callable[[Doors, dict[str, Any], bool], Calls], dict, str]] = {
    "chat.completions required, parallel off": (
        _openai_calls,
        {"tool_choice": "required", "parallel_tool_calls": False, "min_tokens": CALL_BUDGET},
        "tool_calls",
    ),
    "chat.completions named": (
        _openai_calls,
        {"tool_choice": NAMED, "min_tokens": CALL_BUDGET},
        "tool_calls",
    ),
    "responses named": (
        _responses_calls,
        {"tool_choice": {"type": "function", "name": "get_weather"}, "min_tokens": CALL_BUDGET},
        "completed",
    ),
    "responses required, parallel off": (
        _responses_calls,
        {"tool_choice": "required", "parallel_tool_calls": False, "min_tokens": CALL_BUDGET},
        "completed",
    ),
    "messages any, parallel off": (
        _anthropic_calls,
        {"tool_choice": {"type": "any", "disable_parallel_tool_use": True}},
        "tool_use",
    ),
    "messages tool": (
        _anthropic_calls,
        {"tool_choice": {"type": "tool", "name": "get_weather"}},
        "tool_use",
    ),
}


@pytest.fixture(scope="module", params=["batch", "generator"])
def scheduled_doors(request: pytest.FixtureRequest, oracle: DirectGenerator) -> Iterator[Doors]:
    with open_doors(oracle, scheduler=request.param) as d:
        yield d


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("case", FORCED_ONE_CALL)
def test_a_forced_call_ends_the_generation(scheduled_doors: Doors, case: str, stream: bool) -> None:
    door, req, finish = FORCED_ONE_CALL[case]
    for seed in (1, 2):
        body = {**req, "max_tokens": CALL_BUDGET, "temperature": 1.0, "seed": seed}
        got = door(scheduled_doors, body, stream)
        assert got.finish == finish, (case, got)
        assert got.names == ["get_weather"], got
        assert set(got.arguments[0]) == {"city"} and isinstance(got.arguments[0]["city"], str)
        assert 0 < got.tokens < CALL_BUDGET, got  # nothing spent after the call


def test_with_parallel_calls_a_call_is_followed_only_by_calls_or_the_end(
    scheduled_doors: Doors,
) -> None:
    # EOS pushed up: wherever the grammar lets the output end, it ends. Once right after
    # the first call; then with EOS held back one token past that call, where the grammar
    # may only start another call.
    base = {"tool_choice": "required", "max_tokens": CALL_BUDGET, "temperature": 0}
    base["logit_bias"] = {str(EOS): 100}
    one = _openai_calls(scheduled_doors, base, stream=False)
    assert (one.finish, one.names) == ("tool_calls", ["get_weather"]), one
    more = _openai_calls(scheduled_doors, {**base, "min_tokens": one.tokens + 1}, stream=False)
    assert more.finish == "tool_calls", more
    assert len(more.names) >= 2 and set(more.names) == {"get_weather"}, more
    assert more.arguments[0] == one.arguments[0]
    assert all(set(a) == {"city"} for a in more.arguments)
