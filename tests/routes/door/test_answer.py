"""Every door's answer through the whole app, over a fake handle (no model): one error policy
before and during a stream, each door in its own shape.

Before a stream starts an error is an HTTP response; once it has started, any exception (a
``GenAIError`` the server raised, or a bug: logged, told as a generic internal error) ends the
stream with one error event: OpenAI's and the native door's ``data: {"error": {...}}``,
Anthropic's ``event: error``, and Responses' ``error`` event with its sequence number.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from backends.errors import GenAIError, RequestTimedOut
from tests.routes.fakes import FakeHandle, fake_app, said

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "Hello!"}]
STREAMS: dict[str, dict[str, Any]] = {
    "/v1/chat/stream": {"messages": MESSAGES},
    "/v1/chat/completions": {"messages": MESSAGES, "stream": True},
    "/v1/completions": {"prompt": "Once", "stream": True},
    "/v1/responses": {"input": "Hello!", "stream": True},
    "/v1/messages": {"model": "onnx-genai", "messages": MESSAGES, "max_tokens": 8, "stream": True},
}
INTERNAL = {
    "message": "Internal server error.",
    "type": "server_error",
    "param": None,
    "code": None,
}


def events(raw: str) -> list[tuple[str | None, dict[str, Any] | str]]:
    """(event name, data) of each event; ``data`` parsed unless it is ``[DONE]``."""
    out: list[tuple[str | None, dict[str, Any] | str]] = []
    for block in raw.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        data = fields["data"]
        out.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
    return out


def streamed(path: str, failure: Exception) -> list[tuple[str | None, Any]]:
    handle = FakeHandle([said("Hi"), said(" there")], fail=failure)
    with fake_app(handle).stream("POST", path, json=STREAMS[path]) as resp:
        assert resp.status_code == 200, resp.read()
        return events(resp.read().decode())


def error_of(path: str, last: tuple[str | None, Any]) -> dict[str, Any]:
    """The last event, checked to be the door's own error event; the error's fields."""
    name, data = last
    if path == "/v1/responses":
        assert name == "error" and data["type"] == "error"
        assert set(data) == {"type", "sequence_number", "code", "message", "param"}
        return {"code": data["code"], "message": data["message"], "param": data["param"]}
    if path == "/v1/messages":
        assert name == "error" and data["type"] == "error"
        assert set(data["error"]) == {"type", "message"}
        return dict(data["error"])
    assert name is None and set(data) == {"error"}, "the one shape, an unnamed event"
    assert set(data["error"]) == {"message", "type", "param", "code"}
    return dict(data["error"])


@pytest.mark.parametrize("path", sorted(STREAMS))
def test_a_bug_mid_stream_ends_it_with_the_doors_own_error_event(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="genai.errors"):
        sent = streamed(path, RuntimeError("secret detail"))
    error = error_of(path, sent[-1])
    assert "secret detail" not in json.dumps(sent), "a bug's text is logged, never sent"
    if path == "/v1/responses":
        assert error == {"code": "server_error", "message": "Internal server error.", "param": None}
        numbers = [data["sequence_number"] for _, data in sent]
        assert numbers == list(range(len(sent))), "the error event is numbered in turn"
    elif path == "/v1/messages":
        assert error == {"type": "api_error", "message": "Internal server error."}
    else:
        assert error == INTERNAL
    assert any("secret detail" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    assert not any(data == "[DONE]" for _, data in sent), "a failed stream has no [DONE]"


@pytest.mark.parametrize("path", sorted(STREAMS))
def test_a_server_ended_choice_mid_stream_says_what_ended_it(path: str) -> None:
    sent = streamed(path, RequestTimedOut("The request exceeded GENAI_REQUEST_TIMEOUT."))
    error = error_of(path, sent[-1])
    assert "GENAI_REQUEST_TIMEOUT" in error["message"]
    if path == "/v1/messages":
        assert error["type"] == "timeout_error"
    else:
        assert error["code"] == "request_timeout"
    # What was said before the failure was sent.
    assert "there" in json.dumps(sent[:-1])


WHOLE: dict[str, dict[str, Any]] = {
    "/v1/chat": {"messages": MESSAGES},
    "/generate": {"prompt": "Once"},
    "/v1/chat/completions": {"messages": MESSAGES},
    "/v1/completions": {"prompt": "Once"},
    "/v1/responses": {"input": "Hello!"},
    "/v1/messages": {"model": "onnx-genai", "messages": MESSAGES, "max_tokens": 8},
}


@pytest.mark.parametrize("path", sorted(WHOLE))
@pytest.mark.parametrize(
    ("failure", "status"), [(RuntimeError("secret detail"), 500), (RequestTimedOut("late"), 504)]
)
def test_before_a_stream_an_error_is_the_status_in_the_doors_shape(
    path: str, failure: GenAIError, status: int
) -> None:
    handle = FakeHandle([said("Hi")], fail=failure)
    resp = fake_app(handle).post(path, json=WHOLE[path])
    assert resp.status_code == status, resp.text
    assert "secret detail" not in resp.text
    body = resp.json()
    if path == "/v1/messages":
        assert body["type"] == "error"
        assert body["error"]["type"] == ("api_error" if status == 500 else "timeout_error")
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["type"] == ("server_error" if status == 500 else "timeout_error")
