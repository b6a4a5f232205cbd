"""Images through OpenAI chat completions, with the official ``openai`` SDK: the committed
Qwen2.5-VL test model answers a data: URL image with Hugging Face generate()'s greedy tokens
(recorded at build time in expected.json), and refuses what it cannot take by name."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openai import OpenAI

from config.settings import REPO_ROOT
from tests.conftest import make_client, wait_ready

pytestmark = pytest.mark.model

VISION = REPO_ROOT / "tests" / "hub_models" / "qwen2.5-vl"
EXPECTED: dict[str, Any] = json.loads((VISION / "expected.json").read_text())
N = EXPECTED["max_new_tokens"]


def data_url(name: str) -> str:
    return (
        "data:image/png;base64,"
        + base64.b64encode((VISION / "images" / name).read_bytes()).decode()
    )


def openai_messages(case: dict[str, Any]) -> Any:
    """The case's chat in OpenAI's shape: each {"type": "image"} an image_url part, in order."""
    images = iter(case["images"])
    out = []
    for m in case["messages"]:
        content = m["content"]
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": data_url(next(images)), "detail": "low"}}
                if p["type"] == "image"
                else p
                for p in content
            ]
        out.append({"role": m["role"], "content": content})
    return out


def token_texts(ids: list[int]) -> list[str]:
    import numpy as np
    import onnxruntime_genai as og

    tokenizer = og.Tokenizer(str(VISION))
    return [str(tokenizer.decode(np.asarray([t], dtype=np.int32))) for t in ids]


def stream_text(ids: list[int]) -> str:
    import onnxruntime_genai as og

    stream = og.Tokenizer(str(VISION)).create_stream()
    return "".join(stream.decode(t) for t in ids)


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    with make_client(model_dir=VISION, intra_op_threads=1, model_name="qwen-vl") as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="module")
def api(http: TestClient) -> OpenAI:
    return OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http, max_retries=0)


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=[c["name"] for c in EXPECTED["cases"]])
def test_openai_sdk_image_part_gives_the_oracle_tokens(api: OpenAI, case: dict[str, Any]) -> None:
    done = api.chat.completions.create(
        model="qwen-vl",
        messages=openai_messages(case),
        temperature=0,
        max_tokens=N,
        logprobs=True,
    )
    choice = done.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    assert [t.token for t in choice.logprobs.content] == token_texts(case["generated_ids"])
    assert choice.message.content == stream_text(case["generated_ids"])
    assert done.usage is not None
    assert done.usage.prompt_tokens == len(case["prompt_ids"])
    assert done.usage.completion_tokens == N
    details = done.usage.prompt_tokens_details
    assert details is not None and details.image_tokens == (case["image_tokens"] or None)


def test_streamed_image_answer_equals_the_whole_one(api: OpenAI) -> None:
    case = EXPECTED["cases"][0]
    chunks = api.chat.completions.create(
        model="qwen-vl",
        messages=openai_messages(case),
        temperature=0,
        max_tokens=N,
        stream=True,
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == stream_text(case["generated_ids"])


def test_models_and_health_report_what_the_model_reads(http: TestClient) -> None:
    [card] = http.get("/v1/models").json()["data"]
    assert card["id"] == "qwen-vl" and card["modalities"] == ["text", "image"]
    health = http.get("/healthz").json()
    assert health["modalities"]["qwen-vl"] == ["text", "image"]


def test_text_model_refuses_an_image_naming_model_and_modality(client: TestClient) -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": data_url("square.png")}},
                ],
            }
        ],
        "max_tokens": 4,
    }
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "'onnx-genai'" in error["message"] and "image" in error["message"]
    assert error["param"] == "messages.0.content.1"
    assert (
        client.post(
            "/v1/chat/completions", json={**body, "messages": [{"role": "user", "content": "hi"}]}
        ).status_code
        == 200
    )


def test_audio_parts_are_refused_by_name(http: TestClient) -> None:
    body = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}],
            }
        ],
    }
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 400
    assert "input_audio" in r.json()["error"]["message"]


def test_anthropic_sdk_image_block_gives_the_oracle_tokens(http: TestClient) -> None:
    from anthropic import Anthropic

    api = Anthropic(base_url="http://testserver", api_key="none", http_client=http, max_retries=0)
    case = EXPECTED["cases"][0]
    data = base64.b64encode((VISION / "images" / "square.png").read_bytes()).decode()
    message = api.messages.create(
        model="qwen-vl",
        max_tokens=N,
        extra_body={"temperature": 0},
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": data},
                    },
                    {"type": "text", "text": "What is in the picture?"},
                ],
            }
        ],
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == stream_text(case["generated_ids"])
    assert message.usage.output_tokens == N
    assert message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0) == len(
        case["prompt_ids"]
    )
    counted = api.messages.count_tokens(
        model="qwen-vl",
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": data},
                    },
                    {"type": "text", "text": "What is in the picture?"},
                ],
            }
        ],
    )
    assert counted.input_tokens == len(case["prompt_ids"])


def test_responses_input_image_gives_the_oracle_tokens(api: OpenAI) -> None:
    case = EXPECTED["cases"][1]  # two images, text between
    response = api.responses.create(
        model="qwen-vl",
        temperature=0,
        max_output_tokens=N,
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Compare"},
                    {"type": "input_image", "image_url": data_url("square.png"), "detail": "auto"},
                    {"type": "input_text", "text": "with"},
                    {"type": "input_image", "image_url": data_url("wide.png"), "detail": "auto"},
                ],
            }
        ],
    )
    assert response.output_text == stream_text(case["generated_ids"])
    assert response.usage is not None
    assert response.usage.input_tokens == len(case["prompt_ids"])
    assert response.usage.output_tokens == N


def test_native_chat_takes_the_same_parts(http: TestClient) -> None:
    case = EXPECTED["cases"][0]
    body = {"messages": openai_messages(case), "max_tokens": N, "temperature": 0}
    r = http.post("/v1/chat", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["content"] == stream_text(case["generated_ids"])


def test_tokenize_counts_an_image_as_its_image_tokens(http: TestClient) -> None:
    case = EXPECTED["cases"][1]
    r = http.post("/tokenize", json={"messages": openai_messages(case)})
    assert r.status_code == 200, r.text
    assert r.json()["tokens"] == case["prompt_ids"]


def test_metrics_count_media_requests_bytes_and_image_tokens(http: TestClient) -> None:
    def value(text: str, name: str) -> float:
        for line in text.splitlines():
            if line.startswith(name):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    before = http.get("/metrics").text
    case = EXPECTED["cases"][1]
    r = http.post(
        "/v1/chat/completions",
        json={"messages": openai_messages(case), "max_tokens": 2, "temperature": 0},
    )
    assert r.status_code == 200
    after = http.get("/metrics").text
    size = sum((VISION / "images" / f).stat().st_size for f in case["images"])
    label = '{modality="image",model="qwen-vl"}'
    for name, grew in [
        ("genai_media_requests_total" + label, 1),
        ("genai_media_items_total" + label, 2),
        ("genai_media_bytes_total" + label, size),
        ('genai_image_prompt_tokens_total{model="qwen-vl"}', case["image_tokens"]),
    ]:
        assert value(after, name) - value(before, name) == grew, name


def test_langchain_chat_openai_image_message(http: TestClient) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    case = EXPECTED["cases"][0]
    llm = ChatOpenAI(
        model="qwen-vl",
        base_url="http://testserver/v1",
        api_key="none",
        http_client=http,
        temperature=0,
        max_completion_tokens=N,
        max_retries=0,
    )
    message = HumanMessage(
        content=[
            {"type": "image_url", "image_url": {"url": data_url("square.png")}},
            {"type": "text", "text": "What is in the picture?"},
        ]
    )
    answer = llm.invoke([message])
    assert answer.content == stream_text(case["generated_ids"])
