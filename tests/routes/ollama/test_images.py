"""Images on Ollama's /api/chat and /api/generate, on the committed Qwen2.5-VL test model: the
Ollama door gives the OpenAI door's greedy tokens for the same image and prompt (and the
oracle's, recorded with Hugging Face generate()), a text-only model refuses by name."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from config.settings import REPO_ROOT
from tests.conftest import make_client, wait_ready

pytestmark = pytest.mark.model

VISION = REPO_ROOT / "tests" / "hub_models" / "qwen2.5-vl"
EXPECTED: dict[str, Any] = json.loads((VISION / "expected.json").read_text())
N = EXPECTED["max_new_tokens"]
ONE = next(c for c in EXPECTED["cases"] if c["name"] == "one_image")
ASK = "What is in the picture?"  # the one_image case's text, after its image


def b64(name: str) -> str:
    return base64.b64encode((VISION / "images" / name).read_bytes()).decode()


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    with make_client(model_dir=VISION, intra_op_threads=1, model_name="qwen-vl") as c:
        wait_ready(c)
        yield c


def openai_tokens(http: TestClient, content: list[dict[str, Any]]) -> tuple[list[str], str]:
    body = {
        "model": "qwen-vl",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": N,
        "logprobs": True,
    }
    resp = http.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    return [t["token"] for t in choice["logprobs"]["content"]], choice["message"]["content"]


def ollama(http: TestClient, path: str, **body: Any) -> dict[str, Any]:
    greedy = {"temperature": 0, "num_predict": N, "min_tokens": N}
    resp = http.post(
        path,
        json={"model": "qwen-vl", "stream": False, "logprobs": True, "options": greedy, **body},
    )
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def image_part(name: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(name)}"}}


def test_chat_image_gives_the_openai_doors_tokens_and_the_oracles(http: TestClient) -> None:
    [image] = ONE["images"]
    want, text = openai_tokens(http, [image_part(image), {"type": "text", "text": ASK}])
    chat = ollama(
        http, "/api/chat", messages=[{"role": "user", "content": ASK, "images": [b64(image)]}]
    )
    assert [t["token"] for t in chat["logprobs"]] == want
    assert chat["message"]["content"] == text
    assert chat["prompt_eval_count"] == len(ONE["prompt_ids"]) and chat["eval_count"] == N
    generated = ollama(http, "/api/generate", prompt=ASK, images=[b64(image)])
    assert [t["token"] for t in generated["logprobs"]] == want
    assert generated["response"] == text
    assert chat["eval_count"] == len(ONE["generated_ids"])
    assert text == oracle_text(ONE["generated_ids"])


def oracle_text(ids: list[int]) -> str:
    import onnxruntime_genai as og

    stream = og.Tokenizer(str(VISION)).create_stream()
    return "".join(stream.decode(t) for t in ids)


def test_images_across_turns_match_the_openai_door(http: TestClient) -> None:
    first, second = "wide.png", "square.png"
    messages = [
        {"role": "user", "content": "What is this?", "images": [b64(first)]},
        {"role": "assistant", "content": "A wide picture."},
        {"role": "user", "content": "And this one?", "images": [b64(second)]},
    ]
    chat = ollama(http, "/api/chat", messages=messages)
    body = {
        "model": "qwen-vl",
        "messages": [
            {
                "role": "user",
                "content": [image_part(first), {"type": "text", "text": "What is this?"}],
            },
            {"role": "assistant", "content": "A wide picture."},
            {
                "role": "user",
                "content": [image_part(second), {"type": "text", "text": "And this one?"}],
            },
        ],
        "temperature": 0,
        "max_tokens": N,
        "logprobs": True,
    }
    resp = http.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    want = [t["token"] for t in resp.json()["choices"][0]["logprobs"]["content"]]
    assert [t["token"] for t in chat["logprobs"]] == want


def test_show_lists_vision_and_bad_images_are_400s_naming_them(http: TestClient) -> None:
    show = http.post("/api/show", json={"model": "qwen-vl"}).json()
    assert "vision" in show["capabilities"]
    bad = {"role": "user", "content": "hi", "images": ["not base64!"]}
    resp = http.post("/api/chat", json={"model": "qwen-vl", "messages": [bad], "stream": False})
    assert resp.status_code == 400 and "messages.0.images.0" in resp.json()["error"]
    raw = {"model": "qwen-vl", "prompt": "hi", "raw": True, "images": [b64("square.png")]}
    resp = http.post("/api/generate", json=raw)
    assert resp.status_code == 400 and "raw" in resp.json()["error"]


@pytest.mark.parametrize("image", ["file:///etc/passwd", "http://example.org/a.png", "a b c"])
def test_an_image_that_is_not_base64_is_told_so_not_as_a_data_url(
    http: TestClient, image: str
) -> None:
    """Ollama's images are base64 text: the message said "the data: URL is not valid
    base64" for what was never a data: URL."""
    said = {"role": "user", "content": "hi", "images": [image]}
    resp = http.post("/api/chat", json={"model": "qwen-vl", "messages": [said], "stream": False})
    assert resp.status_code == 400
    assert resp.json()["error"] == "messages.0.images.0: the image data is not valid base64."


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
def test_a_text_model_refuses_an_image_naming_model_and_modality(
    client: TestClient, path: str
) -> None:
    said: dict[str, Any] = (
        {"messages": [{"role": "user", "content": "hi", "images": [b64("square.png")]}]}
        if path == "/api/chat"
        else {"prompt": "hi", "images": [b64("square.png")]}
    )
    resp = client.post(path, json={"model": "onnx-genai", "stream": False, **said})
    assert resp.status_code == 400, resp.text
    [message] = resp.json().values()
    assert "'onnx-genai'" in message and "image" in message
    assert (
        "vision"
        not in client.post("/api/show", json={"model": "onnx-genai"}).json()["capabilities"]
    )
