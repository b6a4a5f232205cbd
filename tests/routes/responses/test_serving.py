"""The Responses door's protocol logic (routes/responses/serving.py and builder.py) over a fake
handle, no model: the whole response and its stream agree, the item ids, the statuses at the
token limit and on a cancel, call arguments, and the stream's error event."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.errors import RequestTimedOut
from backends.types import SamplingParams
from routes.http.sse import sse_events
from routes.responses import serving
from routes.responses.state import Turn
from schemas.responses import ResponsesRequest
from tests.routes.fakes import FakeHandle, collect, end, run, said, token

pytestmark = pytest.mark.unit


def body(**extra: Any) -> ResponsesRequest:
    return ResponsesRequest.model_validate({"input": "Hi", **extra})


def whole(pieces: list[ChoiceDelta], **extra: Any) -> dict[str, Any]:
    handle: Any = FakeHandle(pieces)
    return run(serving.response(handle, Turn(body(**extra)))).model_dump(by_alias=True)


def streamed(pieces: list[ChoiceDelta], fail: Exception | None = None) -> list[dict[str, Any]]:
    """The stream's events as sent: (name, data) checked to agree, then the data."""
    handle: Any = FakeHandle(pieces, fail=fail)
    stream = serving.response_stream(handle, Turn(body(stream=True)))
    sent = collect(sse_events(stream.payloads, stream.error_event))
    events = [json.loads(e["data"]) for e in sent]
    assert [e["event"] for e in sent] == [e["type"] for e in events]
    return events


CALL = [
    said("Let me check."),
    ChoiceDelta(0, "", token("<tool_call>"), calls=(CallDelta(0, "call_1", "get_time"),)),
    ChoiceDelta(0, "", token("{"), calls=(CallDelta(0, arguments='{"zone": '),)),
    ChoiceDelta(0, "", token("}"), calls=(CallDelta(0, arguments='"UTC"}'),)),
    end("tool_calls"),
]


def test_a_response_and_its_stream_agree() -> None:
    events = streamed(CALL)
    done = events[-1]
    assert done["type"] == "response.completed"
    answer = whole(CALL)
    for key in ("status", "usage", "model", "incomplete_details"):
        assert done["response"][key] == answer[key], key
    strip = [{k: v for k, v in item.items() if k != "id"} for item in answer["output"]]
    assert [{k: v for k, v in i.items() if k != "id"} for i in done["response"]["output"]] == strip
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_the_output_items_their_ids_and_the_call_arguments() -> None:
    answer = whole(CALL)
    assert re.fullmatch(r"resp_[0-9a-f]{32}", answer["id"])
    message, call = answer["output"]
    assert re.fullmatch(r"msg_[0-9a-f]{32}", message["id"])
    assert re.fullmatch(r"fc_[0-9a-f]{32}", call["id"])
    assert message["content"][0]["text"] == "Let me check." and message["status"] == "completed"
    assert (call["call_id"], call["name"], call["arguments"]) == (
        "call_1",
        "get_time",
        '{"zone": "UTC"}',
    )
    assert answer["usage"] == {
        "input_tokens": 7,
        "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 12,
    }
    assert answer["metrics"]["ttft"] == 0.1


def test_the_stream_opens_and_closes_each_item_in_turn() -> None:
    kinds = [e["type"] for e in streamed(CALL)]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_at_the_token_limit_the_response_and_its_last_item_are_incomplete() -> None:
    answer = whole([said("Hel"), said("lo"), end("length")])
    assert answer["status"] == "incomplete"
    assert answer["incomplete_details"] == {"reason": "max_output_tokens"}
    assert answer["completed_at"] is None
    assert answer["output"][0]["status"] == "incomplete"
    assert streamed([said("Hel"), end("length")])[-1]["type"] == "response.incomplete"


def test_a_cancelled_choice_is_a_completed_response() -> None:
    answer = whole([said("Hel"), end("cancelled")])
    assert answer["status"] == "completed" and answer["output"][0]["status"] == "completed"


@pytest.mark.parametrize(
    ("fail", "code", "message"),
    [
        (RuntimeError("secret"), "server_error", "Internal server error."),
        (RequestTimedOut("Too slow."), "request_timeout", "Too slow."),
    ],
)
def test_any_failure_mid_stream_is_a_numbered_error_event(
    fail: Exception, code: str, message: str
) -> None:
    events = streamed([said("Hel")], fail=fail)
    error = events[-1]
    assert error == {
        "type": "error",
        "sequence_number": len(events) - 1,
        "code": code,
        "message": message,
        "param": None,
    }
    assert not any(e["type"] == "response.completed" for e in events)


def test_the_echoed_request_fields() -> None:
    answer = whole([said("a"), end()], instructions="Be brief.", metadata={"k": "v"})
    assert (answer["instructions"], answer["metadata"]) == ("Be brief.", {"k": "v"})
    assert answer["tool_choice"] == "auto" and answer["parallel_tool_calls"] is True


def test_the_echoed_sampling_is_what_the_core_ran() -> None:
    # The body left temperature out: the core filled in the model's default, which is said.
    handle: Any = FakeHandle([said("a"), end()], sampling=SamplingParams(0.0, top_p=0.5))
    answer = run(serving.response(handle, Turn(body(top_p=0.5)))).model_dump()
    assert (answer["temperature"], answer["top_p"]) == (0.0, 0.5)
