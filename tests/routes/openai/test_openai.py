"""The OpenAI-compatible API through the real app and the real demo model."""

from __future__ import annotations

import json
import math
import threading

import pytest
from fastapi.testclient import TestClient

from app_onnx_genai import create_app
from backends.config import ModelConfig, service_config
from backends.core.service import InferenceService
from backends.errors import StartupError
from backends.models.loader import LoadedModel
from schemas.models_file import model_fields
from schemas.settings import DEMO_MODEL_DIR, Settings
from tests.conftest import (
    METRIC_KEYS,
    DirectGenerator,
    assert_error,
    make_client,
    parse_sse,
    wait_ready,
)

pytestmark = pytest.mark.model

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three rivers and a mountain."},
]
PROMPT = "Once upon a time"
EOS = 2  # the demo model's eos_token_id
BOOL_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


def chat(client: TestClient, **body) -> dict:
    body.setdefault("messages", MESSAGES)
    resp = client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def complete(client: TestClient, **body) -> dict:
    body.setdefault("prompt", PROMPT)
    resp = client.post("/v1/completions", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def stream(client: TestClient, path: str, body: dict) -> list[dict]:
    """Every chunk of a stream; asserts it is SSE and ends with ``[DONE]``."""
    with client.stream("POST", path, json={**body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        payloads = parse_sse(resp.iter_lines())
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def chat_stream_text(chunks: list[dict], index: int = 0) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in chunks
        if c["choices"] and c["choices"][0]["index"] == index
    )


# ---- chat: shapes and greedy correctness -------------------------------------------------------
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
    assert choice["finish_reason"] == "length"
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
    req = {"messages": MESSAGES, "temperature": 0, "max_tokens": 16}
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


# ---- completions -------------------------------------------------------------------------------
def test_completion_is_raw_text_continuation(client: TestClient, oracle: DirectGenerator) -> None:
    expected, tokens = oracle.greedy(PROMPT, 20)
    body = complete(client, temperature=0, max_tokens=20)
    assert body["id"].startswith("cmpl-")
    assert body["object"] == "text_completion"
    [choice] = body["choices"]
    assert choice["text"] == expected
    assert choice["finish_reason"] == "length"
    assert body["usage"]["prompt_tokens"] == len(oracle.tokenizer.encode(PROMPT))
    assert body["usage"]["completion_tokens"] == len(tokens)
    assert set(body["metrics"]) == METRIC_KEYS


def test_completion_stream_joins_to_the_same_text(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 0, "max_tokens": 12}
    whole = complete(client, **req)["choices"][0]["text"]
    chunks = stream(client, "/v1/completions", req)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert set(chunks[-1]["metrics"]) == METRIC_KEYS


def test_completion_stream_include_usage(client: TestClient) -> None:
    req = {
        "prompt": PROMPT,
        "temperature": 0,
        "max_tokens": 5,
        "stream_options": {"include_usage": True},
    }
    *rest, last = stream(client, "/v1/completions", req)
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 5
    assert last["metrics"]["output_tokens"] == 5
    assert rest[-1]["choices"][0]["finish_reason"] == "length" and rest[-1]["metrics"] is None


def test_completion_prompt_list_gives_n_choices_per_prompt(client: TestClient) -> None:
    body = complete(client, prompt=[PROMPT, "The river"], n=2, temperature=0, max_tokens=6)
    texts = [c["text"] for c in body["choices"]]
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    single = [
        complete(client, prompt=p, temperature=0, max_tokens=6)["choices"][0]["text"]
        for p in (PROMPT, "The river")
    ]
    assert texts == [single[0], single[0], single[1], single[1]]


# ---- stop strings ------------------------------------------------------------------------------
def spanning_stop(oracle: DirectGenerator, prompt: str, n: int) -> tuple[str, str]:
    """A stop string that spans two generated tokens, and the text expected before it."""
    text, tokens = oracle.greedy(prompt, n)
    pieces = [oracle.tokenizer.decode([t]) for t in tokens]
    offset = 0
    for a, b in zip(pieces, pieces[1:], strict=False):
        offset += len(a)
        if len(a) >= 2 and len(b) >= 2 and "\ufffd" not in a + b:
            stop = a[-2:] + b[:2]
            cut = text.find(stop)
            if 0 < cut:
                return stop, text[:cut]
    raise AssertionError("no token pair to build a stop string from")


def test_stop_string_spanning_tokens_is_cut(client: TestClient, oracle: DirectGenerator) -> None:
    stop, before = spanning_stop(oracle, PROMPT, 24)
    body = complete(client, temperature=0, max_tokens=24, stop=["never-there", stop])
    [choice] = body["choices"]
    assert choice["text"] == before
    assert choice["finish_reason"] == "stop"


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


# ---- seeds and n -------------------------------------------------------------------------------
def test_same_seed_same_output_and_choice_i_uses_seed_plus_i(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 1.0, "max_tokens": 12}
    a = complete(client, **req, seed=7)["choices"][0]["text"]
    b = complete(client, **req, seed=7)["choices"][0]["text"]
    assert a == b
    several = complete(client, **req, seed=7, n=3)["choices"]
    assert [c["index"] for c in several] == [0, 1, 2]
    for i, choice in enumerate(several):
        alone = complete(client, **req, seed=7 + i)["choices"][0]["text"]
        assert choice["text"] == alone


def test_different_seeds_sample_differently(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 1.5, "max_tokens": 16}
    texts = {complete(client, **req, seed=s)["choices"][0]["text"] for s in range(4)}
    assert len(texts) > 1


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


# ---- logprobs ----------------------------------------------------------------------------------
def test_chat_logprobs_shape_and_greedy_choice_is_the_top_one(client: TestClient) -> None:
    body = chat(client, temperature=0, max_tokens=8, logprobs=True, top_logprobs=3)
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


def test_completion_logprobs_shape(client: TestClient) -> None:
    body = complete(client, temperature=0, max_tokens=6, logprobs=2)
    [choice] = body["choices"]
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 6
    assert all(len(alts) <= 2 and alts for alts in lp["top_logprobs"])
    assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0
    assert all(x <= 0 for x in lp["token_logprobs"])


# ---- penalties, bias, min_tokens ---------------------------------------------------------------
def test_logit_bias_forces_and_bans_tokens(client: TestClient, oracle: DirectGenerator) -> None:
    forced = oracle.tokenizer.encode(" river")[-1]
    body = complete(client, temperature=0, max_tokens=5, logprobs=0, logit_bias={str(forced): 100})
    assert body["choices"][0]["logprobs"]["tokens"] == [oracle.tokenizer.decode([forced])] * 5
    _, greedy = oracle.greedy(PROMPT, 1)
    banned = complete(
        client, temperature=0, max_tokens=1, logprobs=0, logit_bias={str(greedy[0]): -100}
    )
    assert banned["choices"][0]["logprobs"]["tokens"] != [oracle.tokenizer.decode([greedy[0]])]


def test_min_tokens_holds_back_eos(client: TestClient) -> None:
    eager = {"temperature": 0, "max_tokens": 20, "logit_bias": {str(EOS): 100}}
    assert complete(client, **eager)["usage"]["completion_tokens"] == 0
    body = complete(client, **eager, min_tokens=5)
    assert body["usage"]["completion_tokens"] == 5
    assert body["choices"][0]["finish_reason"] == "stop"


def test_presence_and_frequency_penalties_reduce_repeats(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 0, "max_tokens": 40, "logprobs": 0}
    plain = complete(client, **req)["choices"][0]["logprobs"]["tokens"]
    penalised = complete(client, **req, presence_penalty=2.0, frequency_penalty=2.0)
    tokens = penalised["choices"][0]["logprobs"]["tokens"]
    assert len(tokens) - len(set(tokens)) <= len(plain) - len(set(plain))
    assert tokens != plain


def test_repetition_penalty_changes_greedy_output(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 0, "max_tokens": 40}
    plain = complete(client, **req)["choices"][0]["text"]
    assert complete(client, **req, repetition_penalty=1.0)["choices"][0]["text"] == plain
    assert complete(client, **req, repetition_penalty=1.8)["choices"][0]["text"] != plain


# ---- response_format ---------------------------------------------------------------------------
def test_json_schema_output_parses_and_matches(client: TestClient) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": BOOL_SCHEMA}}
    for seed in (1, 2):
        body = chat(client, max_tokens=40, seed=seed, response_format=fmt)
        value = json.loads(body["choices"][0]["message"]["content"])
        assert set(value) == {"ok"} and isinstance(value["ok"], bool)
        assert body["choices"][0]["finish_reason"] == "stop"


def test_json_object_output_is_an_object(client: TestClient) -> None:
    # Any object is allowed, so a random model may write one endless key; those that end parse.
    finished = 0
    for seed in range(1, 6):
        req = {"max_tokens": 60, "seed": seed, "response_format": {"type": "json_object"}}
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


# ---- models ------------------------------------------------------------------------------------
def test_models_list_and_get(client: TestClient) -> None:
    listing = client.get("/v1/models").json()
    assert listing["object"] == "list"
    [card] = listing["data"]
    assert card["id"] == "onnx-genai" and card["object"] == "model"
    assert card["max_model_len"] == card["context_length"] == 2048
    assert client.get("/v1/models/onnx-genai").json() == card
    assert assert_error(client.get("/v1/models/gpt-9"), 404)["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": MESSAGES, "model": "gpt-9"}),
        ("/v1/completions", {"prompt": PROMPT, "model": "gpt-9"}),
    ],
)
def test_unknown_model_is_a_404(client: TestClient, path, body) -> None:
    err = assert_error(client.post(path, json=body), 404, "model")
    assert err["code"] == "model_not_found"


# ---- refusals ----------------------------------------------------------------------------------
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


@pytest.mark.parametrize(
    ("extra", "param"),
    [({"echo": True}, "echo"), ({"suffix": "end"}, "suffix")],
)
def test_unsupported_completion_fields_are_refused(client: TestClient, extra, param) -> None:
    err = assert_error(client.post("/v1/completions", json={"prompt": PROMPT, **extra}), 400, param)
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
    assert "image_url" in assert_error(resp, 400)["message"]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logprobs": 6}, "logprobs"),
        ({"echo": 0}, "echo"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"logit_bias": {"999999": 1}}, "logit_bias"),
    ],
)
def test_bad_completion_parameters_are_400(client: TestClient, extra, param) -> None:
    resp = client.post("/v1/completions", json={"prompt": PROMPT, **extra})
    assert assert_error(resp, 400)["param"].startswith(param)


@pytest.mark.parametrize("stream_", [False, True])
def test_context_overflow_is_a_400_with_counts(client: TestClient, stream_) -> None:
    long_text = "river mountain " * 2000
    resp = client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": long_text}], "stream": stream_},
    )
    err = assert_error(resp, 400)
    assert err["code"] == "context_length_exceeded"
    assert "2048" in err["message"]
    resp = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 5000})
    err = assert_error(resp, 400, "max_tokens")
    assert "5000" in err["message"]


def test_requests_while_loading_are_503() -> None:
    release = threading.Event()

    def slow_loader(cfg: ModelConfig) -> LoadedModel:
        release.wait(30)
        raise StartupError("stopped by the test")

    settings = Settings.load(model_dir=DEMO_MODEL_DIR)
    config = service_config(model_fields(settings.model), settings.server.limits())
    service = InferenceService(config, loader=slow_loader)
    with TestClient(create_app(settings, service)) as c:
        try:
            for path, body in (
                ("/v1/chat/completions", {"messages": MESSAGES}),
                ("/v1/completions", {"prompt": PROMPT, "stream": True}),
                ("/generate", {"prompt": PROMPT}),
            ):
                err = assert_error(c.post(path, json=body), 503)
                assert err["code"] == "model_not_ready"
            card = c.get("/v1/models").json()["data"][0]
            assert card["id"] == "onnx-genai" and card["max_model_len"] is None
        finally:
            release.set()


# ---- auth and CORS -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed_client():
    with make_client(api_key="first-key, second-key") as c:
        wait_ready(c)
        yield c


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/models", None),
        ("POST", "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 2}),
        ("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2}),
        ("POST", "/v1/chat", {"messages": MESSAGES, "max_tokens": 2}),
        ("POST", "/generate", {"prompt": PROMPT, "max_new_tokens": 2}),
        ("GET", "/metrics", None),
    ],
)
def test_every_api_route_needs_a_key_when_one_is_set(
    keyed_client: TestClient, method, path, body
) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic Zmlyc3Qta2V5"}):
        resp = keyed_client.request(method, path, json=body, headers=headers)
        err = assert_error(resp, 401)
        assert err["type"] == "authentication_error"
        assert resp.headers["www-authenticate"] == "Bearer"
    for key in ("first-key", "second-key"):
        resp = keyed_client.request(
            method, path, json=body, headers={"Authorization": f"Bearer {key}"}
        )
        assert resp.status_code == 200, resp.text


def test_probes_and_docs_stay_open(keyed_client: TestClient) -> None:
    assert keyed_client.get("/healthz").status_code == 200
    assert keyed_client.get("/readyz").status_code == 200
    assert keyed_client.get("/docs").status_code == 200
    schema = keyed_client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    chat_op = schema["paths"]["/v1/chat/completions"]["post"]
    assert chat_op["security"] == [{"apiKey": []}] and "401" in chat_op["responses"]
    assert "security" not in schema["paths"]["/healthz"]["get"]


def test_no_key_means_open_and_no_cors_by_default(client: TestClient) -> None:
    resp = client.get("/v1/models", headers={"Origin": "https://example.org"})
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers


def test_cors_origins_are_allowed_when_configured() -> None:
    with make_client(cors_origins="https://ui.example.org", api_key="k") as c:
        preflight = c.options(
            "/v1/chat/completions",
            headers={
                "Origin": "https://ui.example.org",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://ui.example.org"
        denied = c.get("/v1/models", headers={"Origin": "https://evil.example.org"})
        assert "access-control-allow-origin" not in denied.headers
        # A 401 still carries CORS headers, so a browser can read the error.
        unauthorized = c.get("/v1/models", headers={"Origin": "https://ui.example.org"})
        assert unauthorized.status_code == 401
        assert unauthorized.headers["access-control-allow-origin"] == "https://ui.example.org"


# ---- OpenAPI -----------------------------------------------------------------------------------
def test_openapi_documents_the_openai_routes(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ("/v1/chat/completions", "/v1/completions", "/generate"):
        responses = paths[path]["post"]["responses"]
        assert {"200", "400", "404", "503"} <= set(responses)
    for path, chunk in (
        ("/v1/chat/completions", "ChatCompletionChunk"),
        ("/v1/completions", "Completion"),
        ("/v1/chat/stream", "StreamToken"),
    ):
        response = paths[path]["post"]["responses"]["200"]
        # A stream is declared as what it is, text/event-stream; its schema is one event's,
        # whose data is JSON: the route's chunk, or an error.
        event = response["content"]["text/event-stream"]["schema"]
        data = event["properties"]["data"]
        assert event["required"] == ["data"] and data["contentMediaType"] == "application/json"
        refs_of_data = {ref["$ref"].rsplit("/", 1)[-1] for ref in data["contentSchema"]["anyOf"]}
        assert {chunk, "ErrorResponse"} <= refs_of_data
        assert chunk in response["description"]
    assert "application/json" not in paths["/v1/chat/stream"]["post"]["responses"]["200"]["content"]
    components = schema["components"]["schemas"]
    for name in (
        "StreamToken",
        "StreamDone",
        "ChatCompletionChunk",
        "ChatChunkChoice",
        "ChatDelta",
        "ChatCompletion",
        "ModelList",
    ):
        assert name in components
    refs = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"].rsplit("/", 1)[-1])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    delta = {"role", "content", "reasoning_content", "tool_calls"}
    assert set(components["ChatDelta"]["properties"]) == delta
    walk(schema)
    assert refs <= set(components), f"dangling references: {refs - set(components)}"
    assert paths["/v1/models"]["get"] and paths["/v1/models/{model_id}"]["get"]


# ---- what the engine would reject is a 400 before anything runs -------------------------------
def _deep_schema(levels: int) -> dict:
    schema: dict = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


HOSTILE_SCHEMAS = {
    "unknown type": {"type": "nonsense"},
    "type not a string": {"type": 123},
    "unclosed pattern": {"type": "string", "pattern": "(abc"},
    "400 levels": _deep_schema(400),
    "40k properties": {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(40_000)},
    },
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SCHEMAS))
@pytest.mark.parametrize("stream_", [False, True])
def test_a_schema_the_engine_cannot_use_is_a_400(client: TestClient, name: str, stream_) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": HOSTILE_SCHEMAS[name]}}
    body = {"messages": MESSAGES, "max_tokens": 4, "response_format": fmt, "stream": stream_}
    err = assert_error(client.post("/v1/chat/completions", json=body), 400, "response_format")
    assert err["type"] == "invalid_request_error"
    assert "llguidance" not in err["message"].lower() and "\n" not in err["message"]
    assert (
        client.post(
            "/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2}
        ).status_code
        == 200
    )


def test_a_recursive_schema_is_served(client: TestClient) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 5}, "child": {"$ref": "#"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "tree", "schema": schema}}
    body = chat(client, max_tokens=60, seed=1, response_format=fmt)
    assert body["choices"][0]["message"]["content"].startswith("{")


def test_top_k_beyond_the_vocabulary_is_a_400(client: TestClient) -> None:
    err = assert_error(
        client.post("/v1/completions", json={"prompt": PROMPT, "top_k": 5000, "temperature": 1}),
        400,
        "top_k",
    )
    assert "1024" in err["message"]
