"""The Messages API's stream event order and block bookkeeping for thinking (which the demo
model cannot produce), checked on the FastAPI-free mapping with hand-made pieces: stop reasons,
content blocks onto the chat template, tool_choice onto the core."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.types import GeneratedToken
from routes.anthropic import serving
from schemas.anthropic import CountTokensRequest, MessagesRequest
from tests.routes.anthropic.helpers import ASK, MODEL, WEATHER, fold
from tests.routes.fakes import FakeHandle

pytestmark = pytest.mark.model


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
