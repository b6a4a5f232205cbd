"""OpenAI's protocol logic (routes/openai/serving.py) over a fake handle, no model: chat chunks
(content, reasoning, tool-call deltas, logprobs, the finish chunk, ``include_usage``), whole
chat completions, and text completions, whole and streamed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.errors import GenerationFailed
from backends.types import GeneratedToken, Logprob, Usage
from routes.openai import serving
from schemas.openai import ChatCompletionRequest, CompletionRequest
from tests.routes.fakes import FakeHandle, collect, end, run, said, token

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "Hi"}]
METRIC_VALUES = {"ttft": 0.1, "output_tokens": 5, "model": "onnx-genai"}


def chat_body(**extra: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"messages": MESSAGES, **extra})


def completion_body(**extra: Any) -> CompletionRequest:
    return CompletionRequest.model_validate({"prompt": "Once", **extra})


def chunks(pieces: list[ChoiceDelta], n: int = 1, **extra: Any) -> list[dict[str, Any]]:
    handle: Any = FakeHandle(pieces, n=n)
    made = collect(serving.chat_chunks(handle, chat_body(n=n, **extra)))
    return [c.model_dump() for c in made]


def deltas(made: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in made if c["choices"]]


# ---- chat: streams -----------------------------------------------------------------------------
def test_a_chat_stream_is_a_role_chunk_the_text_then_a_finish_chunk_with_the_metrics() -> None:
    made = chunks([said("Hel"), said("lo"), end("length")])
    assert len({c["id"] for c in made}) == 1 and re.fullmatch(
        r"chatcmpl-[0-9a-f]{32}", made[0]["id"]
    )
    assert all(c["object"] == "chat.completion.chunk" and c["created"] == 1 for c in made)
    assert deltas(made) == [
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
        {"content": "lo"},
        {},
    ]
    *rest, last = made
    assert last["choices"][0]["finish_reason"] == "length"
    assert {k: last["metrics"][k] for k in METRIC_VALUES} == METRIC_VALUES
    assert all(c["metrics"] is None and c["usage"] is None for c in rest)
    assert last["usage"] is None


def test_reasoning_and_tool_calls_stream_as_their_own_delta_fields() -> None:
    pieces = [
        ChoiceDelta(0, "", token("<think>"), reasoning="Hmm"),
        said("Sure."),
        ChoiceDelta(0, "", token("<tool_call>"), calls=(CallDelta(0, "call_1", "get_time"),)),
        ChoiceDelta(0, "", token("{"), calls=(CallDelta(0, arguments='{"zone": "UTC"}'),)),
        end("tool_calls"),
    ]
    made = deltas(chunks(pieces))
    assert made[1] == {"reasoning_content": "Hmm"}, "no empty content beside the thinking"
    assert made[2] == {"content": "Sure."}
    assert made[3] == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_time", "arguments": ""},
            }
        ]
    }
    assert made[4] == {
        "tool_calls": [
            {
                "index": 0,
                "id": None,
                "type": None,
                "function": {"name": None, "arguments": '{"zone": "UTC"}'},
            }
        ]
    }


def test_a_token_that_shows_no_text_sends_no_chunk() -> None:
    made = chunks([ChoiceDelta(0, "", token("\ufffd")), said("é"), end()])
    assert deltas(made) == [{"role": "assistant", "content": ""}, {"content": "é"}, {}]


def test_logprobs_come_with_the_tokens_they_belong_to() -> None:
    chosen = token("Hi", -0.5, ("Hi", -0.5), ("Yo", -1.5))
    made = chunks([ChoiceDelta(0, "Hi", chosen, (chosen,)), end()], logprobs=True, top_logprobs=2)
    [entry] = made[1]["choices"][0]["logprobs"]["content"]
    assert entry == {
        "token": "Hi",
        "logprob": -0.5,
        "bytes": [72, 105],
        "top_logprobs": [
            {"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
            {"token": "Yo", "logprob": -1.5, "bytes": [89, 111]},
        ],
    }
    assert made[-1]["choices"][0]["logprobs"] is None


def test_logprobs_the_backend_did_not_report_are_a_failure_not_a_guess() -> None:
    with pytest.raises(GenerationFailed, match="logprobs"):
        chunks([said("Hi"), end()], logprobs=True)


@pytest.mark.parametrize(
    ("finish", "told"), [("cancelled", "stop"), ("stop", "stop"), ("tool_calls", "tool_calls")]
)
def test_the_finish_chunk_says_why_it_ended(finish: str, told: str) -> None:
    assert chunks([said("a"), end(finish)])[-1]["choices"][0]["finish_reason"] == told


def test_include_usage_adds_a_last_chunk_with_the_totals_and_the_metrics() -> None:
    made = chunks([said("a"), end()], stream=True, stream_options={"include_usage": True})
    *rest, usage = made
    assert usage["choices"] == []
    assert usage["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 5,
        "total_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 3},
    }
    assert usage["metrics"]["ttft"] == 0.1
    assert rest[-1]["choices"][0]["finish_reason"] == "stop" and rest[-1]["metrics"] is None


def test_n_choices_each_get_a_role_chunk_and_only_the_last_finish_has_the_metrics() -> None:
    pieces = [said("a", 0), said("b", 1), end(index=0, last=False), end(index=1)]
    made = chunks(pieces, n=2)
    assert [c["choices"][0]["index"] for c in made[:2]] == [0, 1]
    finishes = [c for c in made if c["choices"][0]["finish_reason"]]
    assert [f["choices"][0]["index"] for f in finishes] == [0, 1]
    assert finishes[0]["metrics"] is None and finishes[1]["metrics"] is not None


# ---- chat: whole -------------------------------------------------------------------------------
def whole_chat(pieces: list[ChoiceDelta], **extra: Any) -> dict[str, Any]:
    handle: Any = FakeHandle(pieces, usage_=Usage(10, 3, 4))
    return run(serving.chat_response(handle, chat_body(**extra))).model_dump()


def test_a_whole_chat_completion() -> None:
    body = whole_chat([said("Hel"), said("lo"), end("cancelled")])
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{32}", body["id"])
    assert (body["object"], body["model"], body["created"]) == ("chat.completion", "onnx-genai", 1)
    [choice] = body["choices"]
    assert choice["message"] == {
        "role": "assistant",
        "content": "Hello",
        "refusal": None,
        "reasoning_content": None,
        "tool_calls": None,
    }
    assert choice["finish_reason"] == "stop" and choice["logprobs"] is None
    assert body["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 3,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    assert body["metrics"]["output_tokens"] == 5


def test_a_whole_message_with_thinking_and_a_call_has_no_content() -> None:
    pieces = [
        ChoiceDelta(0, "", token("t"), reasoning="Hmm"),
        ChoiceDelta(0, "", token("c"), calls=(CallDelta(0, "call_1", "f", '{"a": 1}'),)),
        end("tool_calls"),
    ]
    [choice] = whole_chat(pieces)["choices"]
    assert choice["message"]["content"] is None
    assert choice["message"]["reasoning_content"] == "Hmm"
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    ]
    assert choice["finish_reason"] == "tool_calls"


def test_whole_chat_logprobs() -> None:
    t = token("Hi", -0.25)
    [choice] = whole_chat([ChoiceDelta(0, "Hi", t, (t,)), end()], logprobs=True)["choices"]
    assert choice["logprobs"]["content"] == [
        {"token": "Hi", "logprob": -0.25, "bytes": [72, 105], "top_logprobs": []}
    ]


# ---- completions -------------------------------------------------------------------------------
def offset(text: str, at: int, logprob: float) -> GeneratedToken:
    """A token at ``at`` in the text, the likeliest of its step."""
    chosen = Logprob(1, text, logprob)
    return GeneratedToken(1, text, chosen, (chosen,), at)


def test_a_completion_stream_and_its_whole() -> None:
    a, b = offset("Once", 0, -0.1), offset(" more", 4, -0.2)
    pieces = [ChoiceDelta(0, "Once", a, (a,)), ChoiceDelta(0, " more", b, (b,)), end("length")]
    body = completion_body(logprobs=1, stream=True, stream_options={"include_usage": True})
    made = [c.model_dump() for c in collect(serving.completion_chunks(FakeHandle(pieces), body))]  # type: ignore[arg-type]
    assert all(
        re.fullmatch(r"cmpl-[0-9a-f]{32}", c["id"]) and c["object"] == "text_completion"
        for c in made
    )
    assert [c["choices"][0]["text"] for c in made[:-1]] == ["Once", " more", ""]
    assert made[0]["choices"][0]["logprobs"] == {
        "tokens": ["Once"],
        "token_logprobs": [-0.1],
        "top_logprobs": [{"Once": -0.1}],
        "text_offset": [0],
    }
    assert made[2]["choices"][0]["finish_reason"] == "length" and made[2]["metrics"] is None
    assert made[-1]["choices"] == [] and made[-1]["usage"]["total_tokens"] == 12

    whole = run(serving.completion_response(FakeHandle(pieces), completion_body(logprobs=1)))  # type: ignore[arg-type]
    [choice] = whole.model_dump()["choices"]
    assert choice["text"] == "Once more" and choice["finish_reason"] == "length"
    assert choice["logprobs"]["text_offset"] == [0, 4]
    assert choice["logprobs"]["top_logprobs"] == [{"Once": -0.1}, {" more": -0.2}]


def test_completion_logprobs_without_alternatives_have_no_top_list() -> None:
    t = GeneratedToken(1, "x", Logprob(1, "x", -1.0))
    pieces = [ChoiceDelta(0, "x", t, (t,)), end()]
    whole = run(serving.completion_response(FakeHandle(pieces), completion_body(logprobs=0)))  # type: ignore[arg-type]
    assert whole.choices[0].logprobs is not None and whole.choices[0].logprobs.top_logprobs is None


def test_completion_prompts_times_n_are_the_choices_in_order() -> None:
    pieces = [said("a", 1), said("b", 0), end(index=0, last=False), end("length", index=1)]
    handle: Any = FakeHandle(pieces, n=2)
    whole = run(serving.completion_response(handle, completion_body(n=2)))
    assert [(c.index, c.text, c.finish_reason) for c in whole.choices] == [
        (0, "b", "stop"),
        (1, "a", "length"),
    ]
