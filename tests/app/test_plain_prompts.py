"""The demo model continues a plain prompt: no chat template, no ``min_tokens``, through each
door that takes raw text (/generate, /v1/completions, Ollama's /api/generate with ``raw``).
Greedy and sampled with a seed, each of the held-out prompts gets at least ``ENOUGH`` tokens
before the model ends it. The prompts (``PLAIN_PROMPTS``: llama.cpp's server test prompts and
common openings) are held out of the training corpus: modelkit/demo/train.py refuses a corpus
that contains one, and tests/modelkit/test_demo_corpus.py checks the generators."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from modelkit.demo.plain_corpus import PLAIN_PROMPTS

pytestmark = pytest.mark.model

ENOUGH = 8  # tokens before the end token
ROOM = 16  # tokens a request may get
SAMPLINGS = {"greedy": {"temperature": 0.0}, "seeded": {"temperature": 1.0, "seed": 42}}


def generate(client: TestClient, prompt: str, sampling: dict[str, Any]) -> tuple[int, str]:
    body = {"prompt": prompt, "max_new_tokens": ROOM, **sampling}
    resp = client.post("/generate", json=body)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    return out["tokens_generated"], out["generated_text"]


def completions(client: TestClient, prompt: str, sampling: dict[str, Any]) -> tuple[int, str]:
    resp = client.post("/v1/completions", json={"prompt": prompt, "max_tokens": ROOM, **sampling})
    assert resp.status_code == 200, resp.text
    out = resp.json()
    return out["usage"]["completion_tokens"], out["choices"][0]["text"]


def ollama(client: TestClient, prompt: str, sampling: dict[str, Any]) -> tuple[int, str]:
    options = {"num_predict": ROOM, **sampling}
    body = {"model": "onnx-genai", "prompt": prompt, "raw": True, "stream": False}
    resp = client.post("/api/generate", json={**body, "options": options})
    assert resp.status_code == 200, resp.text
    out = resp.json()
    return out["eval_count"], out["response"]


DOORS: dict[str, Callable[[TestClient, str, dict[str, Any]], tuple[int, str]]] = {
    "/generate": generate,
    "/v1/completions": completions,
    "/api/generate": ollama,
}


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("prompt", PLAIN_PROMPTS)
def test_a_plain_prompt_is_continued(
    client: TestClient, prompt: str, door: str, sampling: str
) -> None:
    tokens, text = DOORS[door](client, prompt, SAMPLINGS[sampling])
    assert tokens >= ENOUGH, f"{door} ended {prompt!r} after {tokens} tokens: {text!r}"
    assert text.strip(), text
