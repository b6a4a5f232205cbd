"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) on the real demo model:
a message and its stream agree, stop reasons are honest (max_tokens, stop_sequence naming the
string, tool_use), forced tools give valid tool_use blocks and their results go back through
the template, and count_tokens is what usage reports.

Errors and auth are in test_messages_errors.py; the FastAPI-free mapping in
test_messages_mapping.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.routes.anthropic.helpers import (
    ASK,
    MODEL,
    ONE_CALL,
    TIME,
    WEATHER,
    count,
    fold,
    post,
    prompt_tokens,
    stream,
    text_of,
    valid_input,
)

pytestmark = pytest.mark.model


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
    message = post(
        client,
        tools=[WEATHER, TIME],
        tool_choice=ONE_CALL,
        temperature=1,
        seed=seed,
        max_tokens=200,
    )
    assert message["stop_reason"] == "tool_use"
    [block] = message["content"]  # the call's text is not also a text block
    assert block["type"] == "tool_use" and block["id"].startswith("toolu_")
    assert valid_input(block["name"], block["input"])


def test_a_named_tool_is_the_one_called(client: TestClient) -> None:
    choice = {"type": "tool", "name": "get_time", "disable_parallel_tool_use": True}
    for seed in range(3):
        message = post(
            client,
            tools=[WEATHER, TIME],
            tool_choice=choice,
            temperature=1,
            seed=seed,
            max_tokens=80,
        )
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
