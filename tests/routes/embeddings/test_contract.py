"""Contract: real clients (openai, ollama, ...) of embeddings and reranking against a live
server process serving a chat model, an embedder, a reranker and a decoder embedder from one
models file."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import ollama
import openai
import pytest
from openai import OpenAI

from bench.harness.server import live_server
from config.settings import DEMO_MODEL_DIR, REPO_ROOT

pytestmark = pytest.mark.live

KEY = "embeddings-contract-key"
HUB = REPO_ROOT / "tests" / "hub_models"
EMBEDDER = json.loads((HUB / "st-embedder" / "expected.json").read_text())
DECODER = json.loads((HUB / "decoder-embedder" / "expected.json").read_text())
RERANKER = json.loads((HUB / "reranker" / "expected.json").read_text())
MAX_ABS = 1e-4

MODELS = f"""
[[models]]
name = "demo"
path = "{DEMO_MODEL_DIR}"

[[models]]
name = "embedder"
path = "{HUB / "st-embedder"}"

[[models]]
name = "reranker"
path = "{HUB / "reranker"}"

[[models]]
name = "qwen-embed"
path = "{HUB / "decoder-embedder"}"
"""


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("models") / "models.toml"
    path.write_text(MODELS)
    with live_server(
        GENAI_API_KEY=KEY, GENAI_MODELS_FILE=str(path), GENAI_INTRA_OP_THREADS="1"
    ) as server:
        yield server.url


@pytest.fixture(scope="module")
def api(base_url: str) -> OpenAI:
    return OpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0, timeout=60)


def close(got: list[float], want: list[float]) -> bool:
    return float(np.abs(np.array(got) - np.array(want)).max()) <= MAX_ABS


def test_openai_sdk_default_base64_and_float_agree_with_the_oracle(api: OpenAI) -> None:
    packed = api.embeddings.create(model="embedder", input=EMBEDDER["sentences"])  # base64
    floats = api.embeddings.create(
        model="embedder", input=EMBEDDER["sentences"], encoding_format="float"
    )
    for a, b, want in zip(packed.data, floats.data, EMBEDDER["embeddings"], strict=True):
        assert a.embedding == b.embedding
        assert close(a.embedding, want)
    assert packed.usage.prompt_tokens == sum(EMBEDDER["prompt_tokens"])
    assert packed.model == "embedder"


def test_openai_sdk_dimensions_and_a_decoder_embedder(api: OpenAI) -> None:
    short = api.embeddings.create(model="qwen-embed", input=DECODER["sentences"], dimensions=16)
    for item, full in zip(short.data, DECODER["embeddings"], strict=True):
        want = np.array(full[:16]) / np.linalg.norm(full[:16])
        assert len(item.embedding) == 16 and close(item.embedding, want.tolist())


def test_openai_sdk_sees_bad_requests_as_400s(api: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="Input 0"):
        api.embeddings.create(model="embedder", input=EMBEDDER["long_text"])
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        api.chat.completions.create(model="embedder", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="generator model"):
        api.embeddings.create(model="demo", input="x")
    assert api.embeddings.create(model="embedder", input="next").data


def test_langchain_openai_embeddings_with_text_inputs(base_url: str) -> None:
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    embeddings = OpenAIEmbeddings(
        model="embedder",
        openai_api_base=f"{base_url}/v1",
        openai_api_key=SecretStr(KEY),
        check_embedding_ctx_length=False,  # else it sends tiktoken ids (docs/api/embeddings.md)
    )
    docs = embeddings.embed_documents(EMBEDDER["sentences"][:3])
    query = embeddings.embed_query(EMBEDDER["sentences"][3])
    for got, want in zip([*docs, query], EMBEDDER["embeddings"][:4], strict=True):
        assert close(got, want)


def test_token_ids_from_another_tokenizer_are_a_400(api: OpenAI) -> None:
    # What LangChain sends by default: tiktoken (cl100k) ids, far outside this vocabulary.
    with pytest.raises(openai.BadRequestError, match="vocabulary"):
        api.embeddings.create(model="embedder", input=[[1820, 4611, 100255]])


def test_litellm_embedding(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the network
    import litellm

    out = litellm.embedding(
        model="openai/embedder",
        api_base=f"{base_url}/v1",
        api_key=KEY,
        input=EMBEDDER["sentences"][:2],
    )
    for item, want in zip(out.data, EMBEDDER["embeddings"][:2], strict=True):
        assert close(item["embedding"], want)


def test_cohere_shaped_rerank_over_httpx(base_url: str) -> None:
    body = {
        "model": "reranker",
        "query": RERANKER["query"],
        "documents": RERANKER["documents"],
        "top_n": 3,
        "return_documents": True,
    }
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as client:
        for path in ("/v1/rerank", "/rerank", "/v2/rerank"):
            resp = client.post(path, json=body)
            assert resp.status_code == 200, resp.text
            results = resp.json()["results"]
            best = sorted(range(6), key=lambda i: -RERANKER["logits"][i])[:3]
            assert [r["index"] for r in results] == best
            for r in results:
                want = 1 / (1 + math.exp(-RERANKER["logits"][r["index"]]))
                assert abs(r["relevance_score"] - want) <= 2.5e-4
                assert r["document"]["text"] == RERANKER["documents"][r["index"]]
        bad = client.post("/v1/rerank", json={**body, "documents": []})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "documents"


def test_ollama_sdk_embed_and_embeddings_give_the_openai_vectors(
    api: OpenAI, base_url: str
) -> None:
    client = ollama.Client(host=base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    texts = EMBEDDER["sentences"]
    want = api.embeddings.create(model="embedder", input=texts, encoding_format="float")
    got = client.embed(model="embedder", input=texts)
    for vector, expected in zip(got.embeddings, want.data, strict=True):
        assert close(list(vector), expected.embedding)
    assert got.prompt_eval_count == want.usage.prompt_tokens
    short = client.embed(model="embedder", input=texts[0], dimensions=8, truncate=False)
    assert len(short.embeddings[0]) == 8
    legacy = client.embeddings(model="embedder", prompt=texts[0])
    assert close(list(legacy.embedding), want.data[0].embedding)
    shown = client.show("embedder")
    assert shown.capabilities == ["embedding"]
    with pytest.raises(ollama.ResponseError) as refused:
        client.embed(model="demo", input="hello")
    assert refused.value.status_code == 400 and "generator" in refused.value.error


def test_langchain_ollama_embeddings_give_the_openai_vectors(api: OpenAI, base_url: str) -> None:
    from langchain_ollama import OllamaEmbeddings

    embedder = OllamaEmbeddings(
        model="embedder",
        base_url=base_url,
        client_kwargs={"headers": {"Authorization": f"Bearer {KEY}"}},
    )  # sends every generation option as null
    texts = EMBEDDER["sentences"][:3]
    got = embedder.embed_documents(texts)
    want = api.embeddings.create(model="embedder", input=texts, encoding_format="float")
    for vector, expected in zip(got, want.data, strict=True):
        assert close(vector, expected.embedding)
    assert close(embedder.embed_query(texts[0]), want.data[0].embedding)
