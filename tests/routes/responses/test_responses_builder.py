"""The Responses builder, on pieces the demo model cannot make: thinking, answer and calls become
items in order, an empty answer is still a message, an error event carries the error's code."""

from __future__ import annotations

import pytest
from openai.types.responses import Response as SDKResponse

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.errors import RequestTimedOut
from backends.types import GeneratedToken
from routes.responses.builder import ResponseBuilder
from schemas.responses import ResponsesRequest
from tests.routes.responses.helpers import SDK_EVENT, TIME, FakeHandle

pytestmark = pytest.mark.model


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
