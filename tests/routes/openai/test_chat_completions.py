"""/v1/chat/completions through the real app and the real demo model: shapes and greedy text,
streams, logprobs, response_format, and what it refuses (grammars: test_grammar_errors.py)."""

from __future__ import annotations

import json
import math

import pytest
from fastapi.testclient import TestClient

from tests.conftest import DEMO_CONTEXT, METRIC_KEYS, DirectGenerator, assert_error
from tests.routes.openai.helpers import (
    BOOL_SCHEMA,
    MESSAGES,
    PROMPT,
    chat,
    chat_stream_text,
    complete,
    spanning_stop,
    stream,
)

pytestmark = pytest.mark.model


# ---- shapes and greedy correctness ---------------------------------------------------------------
def test_chat_completion_shape_and_greedy_text(client: TestClient, oracle: DirectGenerator) -> None:
    expected, tokens = oracle.greedy(oracle.chat_prompt(MESSAGES), 24)
    body = chat(client, model="onnx-genai", temperature=0, max_tokens=24)
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert body["model"] == "onnx-genai"
    assert isinstance(body["created"], int)
    [choice] = body["choices"]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == expected
    # The model may end its turn first; the oracle says which.
    assert choice["finish_reason"] == ("length" if len(tokens) == 24 else "stop")
    assert choice["logprobs"] is None
    prompt_tokens = len(oracle.tokenizer.encode(oracle.chat_prompt(MESSAGES)))
    usage = body["usage"]
    assert usage["prompt_tokens"] == prompt_tokens
    assert usage["completion_tokens"] == len(tokens)
    assert usage["total_tokens"] == prompt_tokens + len(tokens)
    assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] <= prompt_tokens
    assert set(body["metrics"]) == METRIC_KEYS
    assert body["metrics"]["output_tokens"] == len(tokens)
    assert body["metrics"]["input_tokens"] == prompt_tokens


def test_max_completion_tokens_is_max_tokens(client: TestClient) -> None:
    body = chat(client, temperature=0, max_completion_tokens=3)
    assert body["usage"]["completion_tokens"] == 3
    assert body["choices"][0]["finish_reason"] == "length"


def test_chat_stream_chunks(client: TestClient) -> None:
    req = {"messages": MESSAGES, "temperature": 0, "max_tokens": 16, "min_tokens": 16}
    whole = chat(client, **req)["choices"][0]["message"]["content"]
    chunks = stream(client, "/v1/chat/completions", req)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content_chunks = [c for c in chunks if c["choices"][0]["delta"].get("content")]
    assert len(content_chunks) > 1, "a stream must arrive as many chunks, not one"
    assert chat_stream_text(chunks) == whole
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["choices"][0]["delta"] == {}
    assert set(last["metrics"]) == METRIC_KEYS
    assert last["metrics"]["output_tokens"] == 16
    assert all(c["metrics"] is None for c in chunks[:-1])
    assert all(c["usage"] is None for c in chunks)


def test_stream_include_usage_sends_a_last_usage_chunk(client: TestClient) -> None:
    req = {
        "messages": MESSAGES,
        "temperature": 0,
        "max_tokens": 8,
        "min_tokens": 8,  # eight tokens, whenever the model would end its answer
        "stream_options": {"include_usage": True},
    }
    chunks = stream(client, "/v1/chat/completions", req)
    *rest, usage_chunk = chunks
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 8
    assert usage_chunk["usage"]["total_tokens"] == usage_chunk["usage"]["prompt_tokens"] + 8
    assert "cached_tokens" in usage_chunk["usage"]["prompt_tokens_details"]
    assert usage_chunk["metrics"]["output_tokens"] == 8
    assert rest[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["usage"] is None and c["metrics"] is None for c in rest)


def test_content_parts_are_joined(client: TestClient) -> None:
    parts = [
        {"type": "text", "text": "Name three rivers"},
        {"type": "text", "text": "and a mountain."},
    ]
    joined = [{"role": "user", "content": "Name three rivers\nand a mountain."}]
    a = chat(client, messages=[{"role": "user", "content": parts}], temperature=0, max_tokens=8)
    b = chat(client, messages=joined, temperature=0, max_tokens=8)
    assert a["usage"]["prompt_tokens"] == b["usage"]["prompt_tokens"]
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]


# ---- stop strings and n --------------------------------------------------------------------------
def test_stop_string_never_leaks_into_a_stream(client: TestClient, oracle: DirectGenerator) -> None:
    stop, before = spanning_stop(oracle, oracle.chat_prompt(MESSAGES), 24)
    req = {"messages": MESSAGES, "temperature": 0, "max_tokens": 24, "stop": stop}
    chunks = stream(client, "/v1/chat/completions", req)
    shown = ""
    for c in chunks:
        if c["choices"]:
            shown += c["choices"][0]["delta"].get("content") or ""
            assert before.startswith(shown), "text beyond the stop string was sent"
    assert shown == before
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chat(client, **req)["choices"][0]["message"]["content"] == before


def test_n_choices_stream_each_to_completion(client: TestClient) -> None:
    req = {"messages": MESSAGES, "temperature": 1.0, "seed": 3, "n": 2, "max_tokens": 8}
    whole = chat(client, **req)
    assert [c["index"] for c in whole["choices"]] == [0, 1]
    assert whole["usage"]["completion_tokens"] == 16
    assert whole["metrics"]["output_tokens"] == 16  # the metrics span every choice
    chunks = stream(client, "/v1/chat/completions", req)
    for choice in whole["choices"]:
        assert chat_stream_text(chunks, choice["index"]) == choice["message"]["content"]
    finishes = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert sorted(c["choices"][0]["index"] for c in finishes) == [0, 1]
    assert finishes[-1]["metrics"]["output_tokens"] == 16


# ---- logprobs ------------------------------------------------------------------------------------
def test_chat_logprobs_shape_and_greedy_choice_is_the_top_one(client: TestClient) -> None:
    body = chat(client, temperature=0, max_tokens=8, min_tokens=8, logprobs=True, top_logprobs=3)
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == body["usage"]["completion_tokens"] == 8
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["logprob"] <= 0 and math.isfinite(entry["logprob"])
        assert entry["bytes"] == list(entry["token"].encode())
        tops = entry["top_logprobs"]
        assert len(tops) == 3
        assert [t["logprob"] for t in tops] == sorted((t["logprob"] for t in tops), reverse=True)
        # Greedy picks the likeliest token.
        assert tops[0]["logprob"] == pytest.approx(entry["logprob"])
        assert tops[0]["token"] == entry["token"]


def test_chat_logprobs_without_alternatives(client: TestClient) -> None:
    body = chat(client, temperature=0, max_tokens=4, logprobs=True)
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == 4 and all(e["top_logprobs"] == [] for e in content)


def test_chat_logprobs_stream_with_the_tokens(client: TestClient) -> None:
    req = {"messages": MESSAGES, "temperature": 0, "max_tokens": 6, "logprobs": True}
    chunks = stream(client, "/v1/chat/completions", req)
    entries = [
        e
        for c in chunks
        if c["choices"]
        for e in (c["choices"][0]["logprobs"] or {}).get("content") or []
    ]
    whole = chat(client, **req)["choices"][0]["logprobs"]["content"]
    assert [e["token"] for e in entries] == [e["token"] for e in whole]
    assert [e["logprob"] for e in entries] == pytest.approx([e["logprob"] for e in whole])


# ---- response_format -----------------------------------------------------------------------------
def test_json_schema_output_parses_and_matches(client: TestClient) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": BOOL_SCHEMA}}
    for seed in (1, 2):
        body = chat(client, max_tokens=40, temperature=1.0, seed=seed, response_format=fmt)
        value = json.loads(body["choices"][0]["message"]["content"])
        assert set(value) == {"ok"} and isinstance(value["ok"], bool)
        assert body["choices"][0]["finish_reason"] == "stop"


def test_json_object_output_is_an_object(client: TestClient) -> None:
    # Any object is allowed, so a model may write one endless key; those that end parse. Asked
    # to repeat an object, the demo model ends some of its samples.
    ask = [{"role": "user", "content": 'Repeat exactly: {"city": "Paris", "days": 3}'}]
    finished = 0
    for seed in range(1, 11):
        req = {
            "messages": ask,
            "max_tokens": 200,
            "temperature": 1.0,
            "seed": seed,
            "response_format": {"type": "json_object"},
        }
        [choice] = chat(client, **req)["choices"]
        assert choice["message"]["content"].startswith("{")
        if choice["finish_reason"] == "stop":
            assert isinstance(json.loads(choice["message"]["content"]), dict)
            finished += 1
    assert finished, "no seed produced a complete object; the test would prove nothing"


def test_text_response_format_is_plain_generation(client: TestClient) -> None:
    req = {"temperature": 0, "max_tokens": 8}
    plain = chat(client, **req)["choices"][0]["message"]["content"]
    text = chat(client, **req, response_format={"type": "text"})["choices"][0]["message"]["content"]
    assert text == plain


# ---- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"audio": {"voice": "alloy"}}, "audio"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
    ],
)
def test_unsupported_chat_fields_are_refused_with_a_reason(
    client: TestClient, extra, param
) -> None:
    err = assert_error(
        client.post("/v1/chat/completions", json={"messages": MESSAGES, **extra}), 400, param
    )
    assert "not supported" in err["message"]


def test_harmless_openai_fields_are_accepted(client: TestClient) -> None:
    body = chat(
        client,
        max_tokens=2,
        user="someone",
        tools=[],
        tool_choice="none",
        modalities=["text"],
        stream=False,
    )
    assert body["choices"][0]["message"]["content"] is not None
    assert complete(client, max_tokens=2, echo=False, best_of=1)["choices"]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": False}, "top_k"),
        ({"max_tokens": "8"}, "max_tokens"),
        ({"n": 0}, "n"),
        ({"n": 99}, "n"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 4, "max_completion_tokens": 5}, "max_completion_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": [""]}, "stop"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**40}, "seed"),
        ({"presence_penalty": 3}, "presence_penalty"),
        ({"frequency_penalty": -3}, "frequency_penalty"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"min_tokens": -1}, "min_tokens"),
        ({"logit_bias": {"x": 1}}, "logit_bias"),
        ({"logit_bias": {"5": 101}}, "logit_bias"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema.json_schema"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages.0.content",
        ),
        ({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, "messages.0.name"),
        ({"messages": []}, "messages"),
        ({"frobnicate": 1}, "frobnicate"),
    ],
)
def test_bad_chat_parameters_are_400(client: TestClient, extra, param) -> None:
    resp = client.post("/v1/chat/completions", json={"messages": MESSAGES, **extra})
    err = assert_error(resp, 400)
    assert err["type"] == "invalid_request_error"
    assert err["param"] is not None and err["param"].startswith(param.split(".")[0])


def test_image_parts_say_why(client: TestClient) -> None:
    content = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    resp = client.post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": content}]}
    )
    error = assert_error(resp, 400)
    assert "'onnx-genai' does not take images" in error["message"]
    assert error["param"] == "messages.0.content.0"


@pytest.mark.parametrize("stream_", [False, True])
def test_context_overflow_is_a_400_with_counts(client: TestClient, stream_) -> None:
    long_text = "river mountain " * DEMO_CONTEXT
    resp = client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": long_text}], "stream": stream_},
    )
    err = assert_error(resp, 400)
    assert err["code"] == "context_length_exceeded"
    assert str(DEMO_CONTEXT) in err["message"]
    too_many = DEMO_CONTEXT + 1000
    resp = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": too_many})
    err = assert_error(resp, 400, "max_tokens")
    assert str(too_many) in err["message"]
