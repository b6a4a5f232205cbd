"""Contract: the official ``anthropic`` SDK against a live server process (main_genai.py)."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import pytest
from anthropic import Anthropic
from anthropic.types import MessageParam, TextBlock, ToolChoiceToolParam, ToolParam, ToolUseBlock

from bench.harness.server import live_server
from tests.conftest import DEMO_CONTEXT

pytestmark = pytest.mark.live

KEY = "contract-test-key"
MODEL = "onnx-genai"
MESSAGES: list[MessageParam] = [{"role": "user", "content": "Name three rivers and a mountain."}]
WEATHER: ToolParam = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with live_server(GENAI_API_KEY=KEY) as server:
        yield server.url


@pytest.fixture(scope="module")
def api(base_url: str) -> Anthropic:
    return Anthropic(base_url=base_url, api_key=KEY, max_retries=0, timeout=60)


def text(content: list[object]) -> str:
    return "".join(b.text for b in content if isinstance(b, TextBlock))


def test_create_stream_and_count_tokens_agree(api: Anthropic) -> None:
    done = api.messages.create(
        model=MODEL,
        max_tokens=16,
        messages=MESSAGES,
        system="You are terse.",
        extra_body={"temperature": 0},
    )
    assert done.type == "message" and done.id.startswith("msg_")
    # The demo model may end its turn before the cap; either way the counts say which.
    ended = done.stop_reason == "end_turn" and done.usage.output_tokens < 16
    assert ended or (done.stop_reason == "max_tokens" and done.usage.output_tokens == 16)
    answer = text(list(done.content))
    assert answer

    events = list(
        api.messages.create(
            model=MODEL,
            max_tokens=16,
            messages=MESSAGES,
            system="You are terse.",
            stream=True,
            extra_body={"temperature": 0},
        )
    )
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    streamed = "".join(
        e.delta.text
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    assert streamed == answer

    with api.messages.stream(
        model=MODEL,
        max_tokens=16,
        messages=MESSAGES,
        system="You are terse.",
        extra_body={"temperature": 0},
    ) as stream:
        assert "".join(stream.text_stream) == answer
        final = stream.get_final_message()
    assert text(list(final.content)) == answer
    assert final.stop_reason == done.stop_reason
    assert final.usage.output_tokens == done.usage.output_tokens

    counted = api.messages.count_tokens(model=MODEL, messages=MESSAGES, system="You are terse.")
    for usage in (done.usage, final.usage):
        assert usage.input_tokens + (usage.cache_read_input_tokens or 0) == counted.input_tokens


def test_stop_sequences(api: Anthropic) -> None:
    full = text(
        list(
            api.messages.create(
                model=MODEL, max_tokens=20, messages=MESSAGES, extra_body={"temperature": 0}
            ).content
        )
    )
    stop = next(
        full[i : i + 3]
        for i in range(4, len(full) - 3)
        if full[i : i + 3].strip() == full[i : i + 3]
    )
    cut = api.messages.create(
        model=MODEL,
        max_tokens=20,
        messages=MESSAGES,
        stop_sequences=[stop],
        extra_body={"temperature": 0},
    )
    assert text(list(cut.content)) == full[: full.find(stop)]
    assert (cut.stop_reason, cut.stop_sequence) == ("stop_sequence", stop)


def test_a_forced_tool_use_round_trip(api: Anthropic) -> None:
    asked: list[MessageParam] = [{"role": "user", "content": "Weather in Paris?"}]
    done = api.messages.create(
        model=MODEL,
        max_tokens=80,
        messages=asked,
        tools=[WEATHER],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        extra_body={"seed": 3},
    )
    assert done.stop_reason == "tool_use"
    [call] = done.content
    assert isinstance(call, ToolUseBlock) and call.name == "get_weather"
    assert call.input["city"] in ("Paris", "Rome")

    named: ToolChoiceToolParam = {
        "type": "tool",
        "name": "get_weather",
        "disable_parallel_tool_use": True,
    }
    events = list(
        api.messages.create(
            model=MODEL,
            max_tokens=80,
            messages=asked,
            tools=[WEATHER],
            tool_choice=named,
            stream=True,
            extra_body={"seed": 3},
        )
    )
    partial = "".join(
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    )
    assert partial and '"city"' in partial

    with api.messages.stream(
        model=MODEL,
        max_tokens=80,
        messages=asked,
        tools=[WEATHER],
        tool_choice=named,
        extra_body={"seed": 3},
    ) as stream:
        final = stream.get_final_message()
    [streamed_call] = final.content
    assert isinstance(streamed_call, ToolUseBlock) and streamed_call.input == call.input
    assert final.stop_reason == "tool_use"

    history: list[MessageParam] = [
        *asked,
        {"role": "assistant", "content": done.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}],
        },
    ]
    answer = api.messages.create(
        model=MODEL,
        max_tokens=8,
        messages=history,
        tools=[WEATHER],
        extra_body={"temperature": 0},
    )
    assert text(list(answer.content))
    counted = api.messages.count_tokens(model=MODEL, messages=history, tools=[WEATHER])
    usage = answer.usage
    assert usage.input_tokens + (usage.cache_read_input_tokens or 0) == counted.input_tokens


def test_errors_map_to_sdk_exceptions(api: Anthropic, base_url: str) -> None:
    image: list[MessageParam] = [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://example.org/a.png"}}
            ],
        }
    ]
    with pytest.raises(anthropic.BadRequestError) as bad:
        api.messages.create(model=MODEL, max_tokens=8, messages=image)
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "image" in bad.value.message
    with pytest.raises(anthropic.NotFoundError):
        api.messages.create(model="claude-opus-4", max_tokens=8, messages=MESSAGES)
    with pytest.raises(anthropic.BadRequestError, match=str(DEMO_CONTEXT)):
        too_long: list[MessageParam] = [{"role": "user", "content": "go " * (DEMO_CONTEXT + 1000)}]
        api.messages.create(model=MODEL, max_tokens=8, messages=too_long)
    wrong = Anthropic(base_url=base_url, api_key="wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as denied:
        wrong.messages.create(model=MODEL, max_tokens=8, messages=MESSAGES)
    assert denied.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_the_key_may_come_as_x_api_key(base_url: str) -> None:
    body = {"model": MODEL, "max_tokens": 2, "messages": MESSAGES}
    resp = httpx.post(f"{base_url}/v1/messages", json=body, headers={"x-api-key": KEY}, timeout=60)
    assert resp.status_code == 200 and resp.json()["type"] == "message"
    resp = httpx.post(f"{base_url}/v1/messages", json=body, headers={"x-api-key": "no"}, timeout=60)
    assert resp.status_code == 401 and resp.json()["error"]["type"] == "authentication_error"
