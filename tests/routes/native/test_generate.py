"""POST /generate: the seed's raw completion, through the real app and the demo model."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import DEMO_CONTEXT, DirectGenerator

pytestmark = pytest.mark.model

PROMPT = "Once upon a time"


def test_generate_continues_the_raw_prompt(client: TestClient, oracle: DirectGenerator) -> None:
    expected, tokens = oracle.greedy(PROMPT, 12)
    resp = client.post("/generate", json={"prompt": PROMPT, "max_new_tokens": 12, "temperature": 0})
    assert resp.status_code == 200
    assert resp.json() == {
        "generated_text": expected,
        "tokens_generated": len(tokens),
        "finish_reason": "length" if len(tokens) == 12 else "stop",
    }


def test_generate_defaults_and_sampling(client: TestClient) -> None:
    resp = client.post("/generate", json={"prompt": PROMPT, "max_new_tokens": 4})
    assert resp.status_code == 200
    body = resp.json()
    assert body["tokens_generated"] <= 4
    # Sampling (default temperature 0.7) may end at EOS; the reason must say which happened.
    expected = "length" if body["tokens_generated"] == 4 else "stop"
    assert body["finish_reason"] == expected


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "prompt"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": PROMPT, "max_new_tokens": 0}, "max_new_tokens"),
        ({"prompt": PROMPT, "temperature": -1}, "temperature"),
        ({"prompt": PROMPT, "top_p": 0}, "top_p"),
        ({"prompt": PROMPT, "messages": []}, "messages"),
    ],
)
def test_generate_bad_input_is_a_400(client: TestClient, body, param) -> None:
    resp = client.post("/generate", json=body)
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == param


def test_generate_context_overflow_is_a_400_naming_its_own_field(client: TestClient) -> None:
    resp = client.post("/generate", json={"prompt": PROMPT, "max_new_tokens": DEMO_CONTEXT + 1000})
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "max_new_tokens"
    assert "Reduce max_new_tokens or the prompt" in error["message"]


def test_generate_checks_the_model_name(client: TestClient) -> None:
    resp = client.post("/generate", json={"prompt": PROMPT, "model": "gpt-9"})
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "model_not_found"
    ok = client.post(
        "/generate", json={"prompt": PROMPT, "model": "onnx-genai", "max_new_tokens": 2}
    )
    assert ok.status_code == 200
