"""The native door's logic (routes/native/serving.py) over a fake handle, no model: /v1/chat's
answer, its stream's token and done events, and /generate's answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.core.request import TextPrompt
from routes.door.fields import door_names
from routes.native import serving
from schemas.generate import GenerateRequest
from schemas.native import ChatRequest
from tests.routes.fakes import FakeHandle, collect, end, run, said, token

pytestmark = pytest.mark.unit

CHAT = ChatRequest.model_validate({"messages": [{"role": "user", "content": "Hi"}]})


def test_chat_answers_the_text_and_the_timing() -> None:
    handle: Any = FakeHandle([said("Hel"), said("lo"), end("length")])
    answer = run(serving.chat_response(handle, CHAT)).model_dump()
    assert answer["content"] == "Hello"
    assert answer["metrics"]["ttft"] == 0.1 and answer["metrics"]["model"] == "onnx-genai"


def test_the_stream_sends_each_piece_of_text_then_done_with_the_timing() -> None:
    pieces = [said("Hel"), ChoiceDelta(0, "", token("\ufffd")), said("lo"), end()]
    handle: Any = FakeHandle(pieces)
    stream = serving.chat_stream(handle, CHAT)
    assert stream.error_event is None, "errors in the one shape"
    payloads = collect(stream.payloads)
    assert all(isinstance(p, str) for p in payloads), "unnamed events: data only"
    *tokens, done = [json.loads(str(p)) for p in payloads]
    assert tokens == [{"token": "Hel"}, {"token": "lo"}]
    assert done["done"] is True and done["token"] == "[DONE]"
    assert done["metrics"]["output_tokens"] == 5


@pytest.mark.parametrize(("finish", "told"), [("length", "length"), ("cancelled", "stop")])
def test_generate_answers_the_text_its_tokens_and_why_it_ended(finish: str, told: str) -> None:
    body = GenerateRequest.model_validate({"prompt": "Once", "max_new_tokens": 3})
    handle: Any = FakeHandle([said("a"), said(" b"), ChoiceDelta(0, "", token("")), end(finish)])
    answer = run(serving.generate_response(handle, body))
    assert answer.model_dump() == {
        "generated_text": "a b",
        "tokens_generated": 3,
        "finish_reason": told,
    }


def test_generate_takes_the_raw_prompt_and_names_its_own_token_limit() -> None:
    body = GenerateRequest.model_validate({"prompt": "Once", "max_new_tokens": 3, "stop": "x"})
    request = serving.generate_request(body, "rid")
    assert request.prompt == TextPrompt("Once")
    assert (request.max_tokens, request.stop, request.request_id) == (3, ["x"], "rid")
    assert door_names(request.prompts, serving.GENERATE_FIELDS)("max_tokens") == "max_new_tokens"


def test_native_chat_shows_no_calls_or_thinking_as_text() -> None:
    # The native door asks for no chat format, so the core never splits; were it to, only
    # the answer text is shown.
    pieces = [ChoiceDelta(0, "", token("t"), reasoning="hm", calls=(CallDelta(0, "c", "f"),))]
    handle: Any = FakeHandle([*pieces, said("ok"), end()])
    assert run(serving.chat_response(handle, CHAT)).content == "ok"
