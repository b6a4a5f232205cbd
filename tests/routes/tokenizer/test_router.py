"""/tokenize, /detokenize and /apply-template against the real demo model."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import DEMO_CONTEXT, DirectGenerator, assert_error

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "Name three rivers."}]


def test_tokenize_text_and_chat(client: TestClient, oracle: DirectGenerator) -> None:
    text = client.post("/tokenize", json={"prompt": "Once upon a time"}).json()
    assert text["tokens"] == [int(t) for t in oracle.tokenizer.encode("Once upon a time")]
    assert text["count"] == len(text["tokens"]) and text["max_model_len"] == DEMO_CONTEXT
    chat = client.post("/tokenize", json={"messages": MESSAGES}).json()
    rendered = oracle.chat_prompt(MESSAGES)
    assert chat["tokens"] == [int(t) for t in oracle.tokenizer.encode(rendered)]
    # The same count a chat completion reports as its prompt tokens.
    usage = client.post("/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 1}).json()
    assert usage["usage"]["prompt_tokens"] == chat["count"]


def test_detokenize_round_trips(client: TestClient) -> None:
    tokens = client.post("/tokenize", json={"prompt": "The river runs."}).json()["tokens"]
    assert client.post("/detokenize", json={"tokens": tokens}).json() == {
        "prompt": "The river runs."
    }


def test_detokenize_keeps_text_after_a_partial_byte_token(
    client: TestClient, oracle: DirectGenerator
) -> None:
    # The first byte of a two-byte character alone: og's Tokenizer.decode of such a sequence
    # stopped there (a silent truncation); the route decodes as generation does, by stream.
    encode = oracle.tokenizer.encode
    [first_byte, _] = encode("é")
    ids = [*map(int, encode("The river")), int(first_byte), *map(int, encode(" is a model"))]
    stream = oracle.tokenizer.create_stream()
    expected = "".join(stream.decode(i) for i in ids)
    got = client.post("/detokenize", json={"tokens": ids}).json()["prompt"]
    assert got == expected and got.endswith(" model")


def test_apply_template_shows_the_prompt(client: TestClient, oracle: DirectGenerator) -> None:
    body = client.post("/apply-template", json={"messages": MESSAGES}).json()
    assert body == {"prompt": oracle.chat_prompt(MESSAGES)}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with_tools = client.post("/apply-template", json={"messages": MESSAGES, "tools": tools}).json()
    assert "<|im_start|>tools\nf()\n" in with_tools["prompt"]  # the demo template's listing


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/tokenize", {}, None),
        ("/tokenize", {"prompt": "x", "messages": MESSAGES}, None),
        ("/tokenize", {"prompt": "x", "model": "gpt-9"}, "model"),
        ("/detokenize", {"tokens": [5, 10**6]}, "tokens"),
        ("/detokenize", {"tokens": ["a"]}, "tokens.0"),
        ("/apply-template", {"messages": []}, "messages"),
    ],
)
def test_bad_tokenizer_requests(
    client: TestClient, path: str, body: dict, param: str | None
) -> None:
    resp = client.post(path, json=body)
    assert resp.status_code in (400, 404)
    err = assert_error(resp, resp.status_code)
    if param is not None:
        assert err["param"] == param
