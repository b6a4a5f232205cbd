"""Tool calling through /v1/chat/completions on the real demo model (its chat template is
Qwen2.5's tool format): forced calls are valid calls that match their schema, ``none`` offers
no tools, and a call's result goes back through the template."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import assert_error, parse_sse

pytestmark = pytest.mark.model

WEATHER = {
    "type": "function",
    "function": {
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
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
            "required": ["zone"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris for three days?"}]


def valid_arguments(name: str, arguments: str) -> bool:
    args = json.loads(arguments)
    if name == "get_weather":
        return (
            set(args) == {"city", "days"}
            and args["city"] in ("Paris", "Rome", "Oslo")
            and isinstance(args["days"], int)
            and 1 <= args["days"] <= 7
        )
    return (
        name == "get_time" and args == {"zone": args.get("zone")} and args["zone"] in ("UTC", "CET")
    )


def post(client: TestClient, **body: Any) -> dict[str, Any]:
    body.setdefault("messages", ASK)
    resp = client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize("seed", range(4))
def test_required_gives_one_valid_call(client: TestClient, seed: int) -> None:
    body = post(
        client,
        tools=[WEATHER, TIME],
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=1.0,
        seed=seed,
        max_tokens=200,
    )
    [choice] = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert valid_arguments(call["function"]["name"], call["function"]["arguments"])
    assert choice["message"]["content"] is None  # the call's text is not also content


def test_required_with_parallel_calls_gives_only_valid_calls(client: TestClient) -> None:
    # The untrained model rarely ends after a call, so it may write calls until max_tokens;
    # every call it finished is valid, and the one cut short is not passed off as a call.
    for seed in range(3):
        [choice] = post(
            client,
            tools=[WEATHER, TIME],
            tool_choice="required",
            temperature=1.0,
            seed=seed,
            max_tokens=200,
        )["choices"]
        calls = choice["message"]["tool_calls"]
        assert calls and choice["finish_reason"] in ("tool_calls", "length")
        for call in calls:
            assert valid_arguments(call["function"]["name"], call["function"]["arguments"])


@pytest.mark.parametrize("parallel", [True, False])
def test_a_named_tool_choice_calls_exactly_that_tool(client: TestClient, parallel: bool) -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    for seed in range(3):
        body = post(
            client,
            tools=[WEATHER, TIME],
            tool_choice=named,
            parallel_tool_calls=parallel,
            temperature=1.0,
            seed=seed,
            max_tokens=200,
        )
        [call] = body["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "get_time"
        assert valid_arguments("get_time", call["function"]["arguments"])


def test_a_forced_call_streams_as_tool_call_deltas(client: TestClient) -> None:
    req = {
        "messages": ASK,
        "tools": [WEATHER],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "seed": 1,
        "max_tokens": 200,
    }
    whole = post(client, **req)["choices"][0]["message"]["tool_calls"]
    with client.stream("POST", "/v1/chat/completions", json={**req, "stream": True}) as resp:
        chunks = [json.loads(p) for p in parse_sse(resp.iter_lines()) if p != "[DONE]"]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert not any(d.get("content") for d in deltas), "call text leaked into content"
    calls: dict[int, dict[str, str]] = {}
    for delta in deltas:
        for part in delta.get("tool_calls") or []:
            call = calls.setdefault(part["index"], {"name": "", "arguments": ""})
            if part.get("id"):
                call["id"] = part["id"]
                call["name"] = part["function"]["name"]
            call["arguments"] += part["function"].get("arguments") or ""
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [
        (w["function"]["name"], w["function"]["arguments"]) for w in whole
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_none_offers_no_tools(client: TestClient) -> None:
    plain = post(client, temperature=0, max_tokens=8)
    none = post(client, tools=[WEATHER], tool_choice="none", temperature=0, max_tokens=8)
    offered = post(client, tools=[WEATHER], temperature=0, max_tokens=8)
    assert none["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert offered["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]  # in the template
    assert none["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    assert none["choices"][0]["message"].get("tool_calls") is None


def test_a_call_and_its_result_go_back_through_the_template(client: TestClient) -> None:
    first = post(
        client,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        seed=2,
        max_tokens=200,
    )
    [call] = first["choices"][0]["message"]["tool_calls"][:1]
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": '{"forecast": "sunny"}'},
    ]
    answer = post(client, messages=history, tools=[WEATHER], temperature=0, max_tokens=12)
    assert answer["choices"][0]["message"]["content"]
    without = post(client, messages=history[:1], tools=[WEATHER], temperature=0, max_tokens=1)
    assert answer["usage"]["prompt_tokens"] > without["usage"]["prompt_tokens"] + 10


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tool_choice": "required"}, "tool_choice"),  # no tools
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
        ),
        (
            {
                "tools": [WEATHER],
                "tool_choice": "required",
                "response_format": {"type": "json_object"},
            },
            "tool_choice",
        ),
        (
            {"tools": [{"type": "function", "function": {"parameters": {}}}]},
            "tools.0.function.name",
        ),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"messages": [{"role": "user", "content": None}]}, "messages.0"),
    ],
)
def test_tool_requests_that_cannot_be_honoured_are_400(client: TestClient, extra, param) -> None:
    resp = client.post("/v1/chat/completions", json={"messages": ASK, **extra})
    assert assert_error(resp, 400)["param"].startswith(param)
