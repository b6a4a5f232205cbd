"""Ollama's door (routes/ollama/serving.py and errors.py) over a fake handle, no model: the
options through the one sampling conversion, messages and tools into the chat template, JSON
lines (thinking, whole tool calls, log-probabilities, the last line's durations), the whole
response as the fold of the lines, and errors in Ollama's shape before and during a stream."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from backends.core.request import ChatPrompt, TextPrompt
from backends.errors import InvalidRequest, RequestTimedOut
from backends.types import SamplingParams
from routes.door.fields import door_names
from routes.http.ndjson import ndjson_lines
from routes.ollama import errors, serving
from schemas.ollama import ChatRequest, GenerateRequest
from tests.routes.fakes import METRICS, FakeHandle, collect, end, fake_app, run, said, token

pytestmark = pytest.mark.unit

ASK = [{"role": "user", "content": "Hi"}]


def chat(**extra: Any) -> ChatRequest:
    return ChatRequest.model_validate({"model": "onnx-genai", "messages": ASK, **extra})


def generate(**extra: Any) -> GenerateRequest:
    return GenerateRequest.model_validate({"model": "onnx-genai", "prompt": "Once", **extra})


def lines(pieces: list[ChoiceDelta], body: ChatRequest | None = None, **more: Any) -> list[Any]:
    handle: Any = FakeHandle(pieces, **more)
    stream = serving.chat_stream(handle, body or chat())
    sent = collect(ndjson_lines(stream.payloads, stream.error_line))
    assert all(s.endswith("\n") and "\n" not in s[:-1] for s in sent), "one object a line"
    return [json.loads(s) for s in sent]


def call(index: int, name: str, arguments: str) -> list[ChoiceDelta]:
    """A tool call as the core reports it: its start, then its arguments in two pieces."""
    half = len(arguments) // 2
    return [
        ChoiceDelta(0, "", calls=(CallDelta(index, f"call_{index}", name),)),
        ChoiceDelta(0, "", calls=(CallDelta(index, arguments=arguments[:half]),)),
        ChoiceDelta(0, "", calls=(CallDelta(index, arguments=arguments[half:]),)),
    ]


# ---- requests ----------------------------------------------------------------------------------
def test_unset_options_take_ollamas_defaults_through_the_one_conversion() -> None:
    request = serving.chat_request(chat(), "rid")
    assert request.sampling == SamplingParams(temperature=0.8, top_p=0.9, top_k=40)
    assert (request.max_tokens, request.stop, request.request_id) == (None, (), "rid")
    assert request.split_reasoning and request.tool_choice == "none"


def test_each_sampling_option_reaches_the_core() -> None:
    options = {
        "temperature": 0.3,
        "top_p": 0.5,
        "top_k": 7,
        "seed": 11,
        "num_predict": 33,
        "stop": ["END", "\n\n"],
        "repeat_penalty": 1.2,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "min_tokens": 4,
    }
    request = serving.chat_request(chat(options=options), "r")
    assert request.sampling == SamplingParams(
        temperature=0.3,
        top_p=0.5,
        top_k=7,
        seed=11,
        min_new_tokens=4,
        repetition_penalty=1.2,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
    )
    assert (request.max_tokens, list(request.stop)) == (33, ["END", "\n\n"])


@pytest.mark.parametrize("num_predict", [-1, -2])
def test_generating_until_the_context_is_full_means_the_server_default(num_predict: int) -> None:
    request = serving.chat_request(chat(options={"num_predict": num_predict}), "r")
    assert request.max_tokens is None


def test_seed_minus_one_is_a_random_seed_and_greedy_is_temperature_zero() -> None:
    sampling = serving.chat_request(chat(options={"seed": -1, "temperature": 0}), "r").sampling
    assert sampling.seed is None and sampling.greedy


def test_format_json_and_a_schema_become_json_schema_guidance() -> None:
    assert serving.chat_request(chat(), "r").sampling.guidance is None
    assert serving.chat_request(chat(format=""), "r").sampling.guidance is None
    kind, grammar = serving.chat_request(chat(format="json"), "r").sampling.guidance or ("", "")
    assert kind == "json_schema" and json.loads(grammar)["type"] == "object"
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    kind, grammar = serving.generate_request(generate(format=schema), "r").sampling.guidance or (
        "",
        "",
    )
    assert kind == "json_schema" and json.loads(grammar)["properties"] == schema["properties"]
    names = door_names(serving.chat_request(chat(), "r").prompts, serving.FIELDS)
    assert names("guidance") == "format" and names("speculative.x") == "options.speculative.x"


@pytest.mark.parametrize(
    ("think", "args"),
    [
        (True, {"enable_thinking": True}),
        (False, {"enable_thinking": False}),
        ("high", {"enable_thinking": True, "reasoning_effort": "high"}),
    ],
)
def test_think_sets_the_templates_switch(think: Any, args: dict[str, Any]) -> None:
    prompt = serving.chat_request(chat(think=think), "r").prompt
    assert isinstance(prompt, ChatPrompt) and prompt.template_args == args
    prompt = serving.generate_request(generate(think=think), "r").prompt
    assert isinstance(prompt, ChatPrompt) and prompt.template_args == args


def test_history_with_a_call_and_its_result_goes_into_the_template() -> None:
    tool = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object"}},
    }
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "thinking": "They want weather.",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
    request = serving.chat_request(chat(messages=history, tools=[tool]), "r")
    prompt = request.prompt
    assert isinstance(prompt, ChatPrompt)
    assert prompt.tools == [tool]
    assert request.tool_choice == "auto"
    assert prompt.messages[2]["tool_calls"] == [
        {
            "id": None,
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
        }
    ]
    assert "thinking" not in prompt.messages[2]
    assert prompt.messages[3] == {"role": "tool", "content": "sunny", "name": "get_weather"}


def test_the_tool_choice_extension_reaches_the_core() -> None:
    tool = {"type": "function", "function": {"name": "f"}}
    body = chat(tools=[tool], options={"tool_choice": "required"})
    assert serving.chat_request(body, "r").tool_choice == "required"
    assert serving.chat_request(chat(tools=[]), "r").tool_choice == "none"


def test_generate_wraps_the_prompt_in_the_template_unless_raw() -> None:
    prompt = serving.generate_request(generate(system="Be brief."), "r").prompt
    assert isinstance(prompt, ChatPrompt)
    assert list(prompt.messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Once"},
    ]
    assert serving.generate_request(generate(raw=True), "r").prompt == TextPrompt("Once")


def test_num_ctx_beyond_the_model_and_think_on_a_model_that_does_not_are_refused() -> None:
    serving.check(chat(options={"num_ctx": 2048}), max_length=2048, thinks=False)
    with pytest.raises(InvalidRequest, match="2048") as exc:
        serving.check(chat(options={"num_ctx": 4096}), max_length=2048, thinks=False)
    assert exc.value.param == "options.num_ctx"
    with pytest.raises(InvalidRequest, match="thinking") as exc:
        serving.check(chat(think=True), max_length=2048, thinks=False)
    assert exc.value.param == "think"
    serving.check(chat(think=False), max_length=2048, thinks=False)
    serving.check(chat(think="low"), max_length=2048, thinks=True)


# ---- lines -------------------------------------------------------------------------------------
def test_each_piece_is_a_line_and_the_last_is_done_with_the_counts() -> None:
    sent = lines([said("Hel"), said("lo"), end("length")])
    assert [s["message"]["content"] for s in sent[:-1]] == ["Hel", "lo"]
    assert all(s["done"] is False and s["model"] == "onnx-genai" for s in sent[:-1])
    assert all(s["created_at"].endswith("Z") for s in sent)
    last = sent[-1]
    assert last["done"] is True and last["done_reason"] == "length"
    assert last["message"] == {"role": "assistant", "content": ""}
    assert (last["prompt_eval_count"], last["eval_count"]) == (7, 5)


def test_durations_are_nanoseconds_from_the_cores_timing_and_add_up() -> None:
    last = lines([said("x"), end()], queued=0.02)[-1]
    assert last["total_duration"] == round(METRICS.total_latency * 1e9)
    assert last["load_duration"] == 20_000_000  # the wait for a slot
    assert last["prompt_eval_duration"] == round((METRICS.ttft - 0.02) * 1e9)
    # First to last token: 4 gaps of tpot for 5 tokens.
    assert abs(last["eval_duration"] - 4 * METRICS.tpot * 1e9) <= 1
    parts = last["load_duration"] + last["prompt_eval_duration"] + last["eval_duration"]
    assert 0 < parts <= last["total_duration"]


def test_thinking_goes_to_message_thinking() -> None:
    pieces = [ChoiceDelta(0, "", reasoning="Hmm"), said("Yes"), end()]
    sent = lines(pieces, chat(think=True))
    assert sent[0]["message"] == {"role": "assistant", "content": "", "thinking": "Hmm"}
    assert sent[1]["message"] == {"role": "assistant", "content": "Yes"}
    whole = run(serving.chat_response(FakeHandle(pieces), chat(think=True)))  # type: ignore[arg-type]
    assert (whole.message.thinking, whole.message.content) == ("Hmm", "Yes")


def test_a_tool_call_is_one_line_once_whole_with_its_arguments_as_an_object() -> None:
    pieces = [
        said("Let me look."),
        *call(0, "get_weather", '{"city": "Paris"}'),
        *call(1, "get_time", '{"zone": "CET"}'),
        end("tool_calls"),
    ]
    sent = lines(pieces)
    calls = [c for s in sent for c in s["message"].get("tool_calls", [])]
    assert calls == [
        {
            "id": "call_0",
            "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
        },
        {
            "id": "call_1",
            "function": {"index": 1, "name": "get_time", "arguments": {"zone": "CET"}},
        },
    ]
    assert [len(s["message"].get("tool_calls", [])) for s in sent] == [0, 1, 1, 0]
    assert sent[-1]["done_reason"] == "stop", "Ollama ends a turn with calls as a stop"


def test_the_whole_response_is_the_fold_of_the_lines() -> None:
    pieces = [said("Hi"), *call(0, "f", '{"a": 1}'), end("tool_calls")]
    whole = run(serving.chat_response(FakeHandle(pieces), chat())).model_dump(exclude_none=True)  # type: ignore[arg-type]
    assert whole["message"] == {
        "role": "assistant",
        "content": "Hi",
        "tool_calls": [
            {"id": "call_0", "function": {"index": 0, "name": "f", "arguments": {"a": 1}}}
        ],
    }
    assert whole["done"] is True and whole["eval_count"] == 5


def test_log_probabilities_come_with_the_line_of_their_tokens() -> None:
    piece = ChoiceDelta(
        0, "Hi", token("Hi", -0.5, ("Yo", -1.5)), (token("Hi", -0.5, ("Yo", -1.5)),)
    )
    sent = lines([piece, end()], chat(logprobs=True, top_logprobs=1))
    assert sent[0]["logprobs"] == [
        {
            "token": "Hi",
            "logprob": -0.5,
            "bytes": [72, 105],
            "top_logprobs": [{"token": "Yo", "logprob": -1.5, "bytes": [89, 111]}],
        }
    ]
    assert "logprobs" not in lines([piece, end()])[0]


def test_generate_lines_say_response_and_fold_to_the_whole() -> None:
    pieces = [said("Once"), said(" upon"), end()]
    handle: Any = FakeHandle(pieces)
    stream = serving.generate_stream(handle, generate())
    sent = [json.loads(s) for s in collect(ndjson_lines(stream.payloads, stream.error_line))]
    assert [s["response"] for s in sent] == ["Once", " upon", ""]
    assert sent[-1]["done"] is True and "message" not in sent[-1]
    whole = run(serving.generate_response(FakeHandle(pieces), generate()))  # type: ignore[arg-type]
    assert (whole.response, whole.done_reason) == ("Once upon", "stop")


# ---- errors ------------------------------------------------------------------------------------
def test_an_error_in_the_one_shape_is_ollamas_naming_the_parameter() -> None:
    one = {"error": {"message": "too big", "type": "x", "param": "options.top_k", "code": None}}
    assert errors.ollama_error(400, one) == {"error": "options.top_k: too big"}


def test_a_bug_mid_stream_is_a_last_error_line_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="genai.errors"):
        sent = lines([said("Hi")], fail=RuntimeError("secret detail"))
    assert sent[-1] == {"error": "Internal server error."}
    assert "secret detail" not in json.dumps(sent)
    assert not any(s.get("done") for s in sent)


def test_a_timeout_mid_stream_through_the_app_is_an_error_line_after_the_text() -> None:
    handle = FakeHandle([said("Hi"), said(" there")], fail=RequestTimedOut("Exceeded it."))
    body = {"model": "onnx-genai", "messages": ASK}
    with fake_app(handle).stream("POST", "/api/chat", json=body) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "application/x-ndjson"
        sent = [json.loads(line) for line in resp.iter_lines() if line]
    assert [s["message"]["content"] for s in sent[:-1]] == ["Hi", " there"]
    assert sent[-1] == {"error": "Exceeded it."}


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
@pytest.mark.parametrize(
    ("failure", "status"), [(RuntimeError("secret detail"), 500), (RequestTimedOut("late"), 504)]
)
def test_before_a_stream_an_error_is_the_status_in_ollamas_shape(
    path: str, failure: Exception, status: int
) -> None:
    body = {"model": "onnx-genai", "messages": ASK, "prompt": "Once", "stream": False}
    body.pop("prompt" if path == "/api/chat" else "messages")
    resp = fake_app(FakeHandle([said("Hi")], fail=failure)).post(path, json=body)
    assert resp.status_code == status
    assert resp.json() == {"error": "Internal server error." if status == 500 else "late"}
