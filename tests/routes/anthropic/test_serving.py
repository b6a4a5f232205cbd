"""The Messages door's protocol logic (routes/anthropic/serving.py and errors.py) over a fake
handle, no model: sampling through the one conversion, content blocks, stop reasons, usage,
ids, and errors in Anthropic's shape."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.errors import GenerationFailed
from backends.types import SamplingParams, Usage
from routes.anthropic import errors, serving
from routes.http.sse import sse_events
from schemas.anthropic import MessagesRequest
from tests.routes.fakes import FakeHandle, collect, end, run, said, token

pytestmark = pytest.mark.unit

ASK = [{"role": "user", "content": "Hi"}]


def body(**extra: Any) -> MessagesRequest:
    return MessagesRequest.model_validate(
        {"model": "onnx-genai", "messages": ASK, "max_tokens": 9, **extra}
    )


def whole(pieces: list[ChoiceDelta], **extra: Any) -> dict[str, Any]:
    handle: Any = FakeHandle(pieces, usage_=Usage(10, 4, 6))
    return run(serving.message_response(handle, body(**extra))).model_dump()


def streamed(pieces: list[ChoiceDelta], fail: Exception | None = None) -> list[dict[str, Any]]:
    handle: Any = FakeHandle(pieces, fail=fail)
    stream = serving.message_stream(handle, body(stream=True))
    sent = collect(sse_events(stream.payloads, stream.error_event))
    events = [json.loads(e["data"]) for e in sent]
    assert [e["event"] for e in sent] == [e["type"] for e in events]
    return events


# ---- requests ----------------------------------------------------------------------------------
def test_sampling_goes_through_the_one_conversion_unset_means_no_cut() -> None:
    sampling = serving.messages_request(body(temperature=0.3, seed=5), "r").sampling
    assert sampling == SamplingParams(temperature=0.3, top_p=1.0, top_k=0, seed=5)
    sampling = serving.messages_request(body(top_p=0.9, top_k=40), "r").sampling
    assert sampling == SamplingParams(temperature=1.0, top_p=0.9, top_k=40)


def test_stop_sequences_and_the_token_limit_reach_the_core() -> None:
    request = serving.messages_request(body(stop_sequences=["END"], max_tokens=33), "rid")
    assert (request.stop, request.max_tokens, request.request_id) == (["END"], 33, "rid")
    assert serving.messages_request(body(), "r").stop == ()


# ---- the message -------------------------------------------------------------------------------
def test_a_plain_answer_is_one_text_block() -> None:
    message = whole([said("Hel"), said("lo"), end("length")])
    assert re.fullmatch(r"msg_[0-9a-f]{32}", message["id"])
    assert message["content"] == [{"type": "text", "text": "Hello"}]
    assert (message["stop_reason"], message["stop_sequence"]) == ("max_tokens", None)
    # input_tokens leaves out what was read from the cache.
    assert message["usage"] == {
        "input_tokens": 4,
        "output_tokens": 4,
        "cache_read_input_tokens": 6,
        "cache_creation_input_tokens": 0,
    }
    assert message["metrics"]["ttft"] == 0.1


def test_an_empty_answer_has_no_block() -> None:
    assert whole([end()])["content"] == []
    kinds = [e["type"] for e in streamed([end()])]
    assert kinds == ["message_start", "ping", "message_delta", "message_stop"]


@pytest.mark.parametrize(
    ("finish", "matched", "reason"),
    [
        ("stop", None, "end_turn"),
        ("cancelled", None, "end_turn"),  # the door's own doing: told as a plain end
        ("length", None, "max_tokens"),
        ("stop", "END", "stop_sequence"),
        ("tool_calls", None, "tool_use"),
    ],
)
def test_the_stop_reason(finish: str, matched: str | None, reason: str) -> None:
    assert serving.stop_reason(finish, matched) == reason  # type: ignore[arg-type]


def test_the_stop_string_the_core_reports_is_named() -> None:
    message = whole([said("a"), end("stop", stop_sequence="END")], stop_sequences=["END"])
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "END")


def test_a_call_split_over_pieces_is_one_tool_use_block_with_its_input() -> None:
    pieces = [
        ChoiceDelta(0, "", token("<"), calls=(CallDelta(0, "call_9f", "get_time", '{"zo'),)),
        ChoiceDelta(0, "", token(">"), calls=(CallDelta(0, arguments='ne": "UTC"}'),)),
        ChoiceDelta(0, "", token("<"), calls=(CallDelta(1, "call_a0", "get_time"),)),
        ChoiceDelta(0, "", token(">"), calls=(CallDelta(1, arguments='{"zone": "CET"}'),)),
        end("tool_calls"),
    ]
    message = whole(pieces)
    assert message["content"] == [
        {"type": "tool_use", "id": "toolu_9f", "name": "get_time", "input": {"zone": "UTC"}},
        {"type": "tool_use", "id": "toolu_a0", "name": "get_time", "input": {"zone": "CET"}},
    ]
    assert message["stop_reason"] == "tool_use"
    deltas = [e for e in streamed(pieces) if e["type"] == "content_block_delta"]
    assert [(e["index"], e["delta"]["partial_json"]) for e in deltas] == [
        (0, '{"zo'),
        (0, 'ne": "UTC"}'),
        (1, '{"zone": "CET"}'),
    ]


def test_arguments_that_are_not_an_object_are_a_failure() -> None:
    pieces = [ChoiceDelta(0, "", token("x"), calls=(CallDelta(0, "call_1", "f", "[1]"),)), end()]
    with pytest.raises(GenerationFailed, match="not a JSON object"):
        whole(pieces)


# ---- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (503, "overloaded_error"),
        (504, "timeout_error"),
        (502, "api_error"),
    ],
)
def test_each_status_has_its_anthropic_error_type(status: int, kind: str) -> None:
    assert errors.error_type(status) == kind


def test_an_error_in_the_one_shape_is_reshaped_naming_the_parameter() -> None:
    one = {"error": {"message": "too big", "type": "x", "param": "max_tokens", "code": None}}
    assert errors.anthropic_error(400, one, "req-1") == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: too big"},
        "request_id": "req-1",
    }


def test_a_failure_mid_stream_is_an_anthropic_error_event() -> None:
    events = streamed([said("Hel")], fail=RuntimeError("secret"))
    assert [e["type"] for e in events][-3:] == [
        "content_block_start",
        "content_block_delta",
        "error",
    ]
    assert events[-1] == {
        "type": "error",
        "error": {"type": "api_error", "message": "Internal server error."},
    }
