"""The OpenAI-compatible API's tests share these: the requests, and reading a stream."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.conftest import DirectGenerator, parse_sse

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


def spanning_stop(
    oracle: DirectGenerator, prompt: str, n: int, min_new_tokens: int = 0
) -> tuple[str, str]:
    """A stop string that spans two generated tokens, and the text expected before it."""
    text, tokens = oracle.greedy(prompt, n, min_new_tokens)
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
