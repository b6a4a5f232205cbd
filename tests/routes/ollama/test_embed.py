"""Ollama's /api/embed and /api/embeddings through the real app, on the test embedder served
beside a generator and a reranker: the vectors are /v1/embeddings' (and the oracle's), truncate
defaults to true, num_ctx cuts, dimensions shortens, errors are Ollama's shape, and the
listings name the embedder's capability."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.conftest import make_client, wait_ready

pytestmark = pytest.mark.model

HUB = REPO_ROOT / "tests" / "hub_models"
EMBEDDER = json.loads((HUB / "st-embedder" / "expected.json").read_text())
MAX_ABS = 1e-4  # float results differ a little across CPU kinds; this holds on both
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
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("models") / "models.toml"
    path.write_text(MODELS)
    with make_client(models_file=path, intra_op_threads=1) as client:
        wait_ready(client)
        yield client


def post(client: TestClient, path: str, status: int = 200, **body: Any) -> dict[str, Any]:
    resp = client.post(path, json=body)
    assert resp.status_code == status, resp.text
    out: dict[str, Any] = resp.json()
    return out


def error(client: TestClient, path: str, status: int, **body: Any) -> str:
    out = post(client, path, status, **body)
    assert set(out) == {"error"}, out  # Ollama's shape
    message: str = out["error"]
    return message


def openai_vectors(client: TestClient, texts: list[str], **extra: Any) -> np.ndarray:
    body = post(client, "/v1/embeddings", model="embedder", input=texts, **extra)
    return np.array([d["embedding"] for d in body["data"]])


def test_embed_gives_the_openai_doors_vectors_and_the_oracles(client: TestClient) -> None:
    texts = EMBEDDER["sentences"]
    body = post(client, "/api/embed", model="embedder", input=texts)
    got = np.array(body["embeddings"])
    assert np.abs(got - openai_vectors(client, texts)).max() <= MAX_ABS
    assert np.abs(got - np.array(EMBEDDER["embeddings"])).max() <= MAX_ABS
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert body["model"] == "embedder"
    assert body["prompt_eval_count"] == sum(EMBEDDER["prompt_tokens"])
    assert body["total_duration"] > 0 and body["load_duration"] == 0
    one = post(client, "/api/embed", model="embedder", input=texts[0])
    assert np.abs(np.array(one["embeddings"]) - got[:1]).max() <= MAX_ABS


def test_the_legacy_route_gives_one_prompts_vector(client: TestClient) -> None:
    text = EMBEDDER["sentences"][2]
    body = post(client, "/api/embeddings", model="embedder", prompt=text)
    assert set(body) == {"embedding"}
    assert np.abs(np.array(body["embedding"]) - openai_vectors(client, [text])[0]).max() <= MAX_ABS
    assert post(client, "/api/embeddings", model="embedder", prompt="") == {"embedding": []}


def test_empty_input_loads_and_embeds_nothing(client: TestClient) -> None:
    empties: list[str | list[str]] = ["", []]
    for empty in empties:
        body = post(client, "/api/embed", model="embedder", input=empty)
        assert body["embeddings"] == [] and body["model"] == "embedder"


def test_truncate_defaults_to_true_and_false_refuses_an_over_long_input(
    client: TestClient,
) -> None:
    texts = ["short", EMBEDDER["long_text"]]
    cut = post(client, "/api/embed", model="embedder", input=texts)
    want = openai_vectors(client, texts, truncate=True)
    assert np.abs(np.array(cut["embeddings"]) - want).max() <= MAX_ABS
    assert np.abs(np.array(cut["embeddings"][1]) - EMBEDDER["long_truncated_embedding"]).max() <= (
        MAX_ABS
    )
    message = error(client, "/api/embed", 400, model="embedder", input=texts, truncate=False)
    assert "Input 1" in message and str(EMBEDDER["long_text_tokens"]) in message
    legacy = error(client, "/api/embeddings", 400, model="embedder", prompt=EMBEDDER["long_text"])
    assert str(EMBEDDER["long_text_tokens"]) in legacy


def test_an_over_long_input_names_only_this_routes_own_fields(client: TestClient) -> None:
    """/api/embed's way out is its truncate; the older route has none to offer, and calls its
    text the prompt."""
    texts = ["short", EMBEDDER["long_text"]]
    message = error(client, "/api/embed", 400, model="embedder", input=texts, truncate=False)
    assert message.endswith("Shorten it, or ask for truncation (truncate).")
    legacy = error(client, "/api/embeddings", 400, model="embedder", prompt=EMBEDDER["long_text"])
    assert legacy.startswith("prompt: Input 0 is") and legacy.endswith("Shorten it.")
    assert "truncat" not in legacy


def test_num_ctx_is_where_truncate_cuts(client: TestClient) -> None:
    text = EMBEDDER["long_text"]
    body = post(client, "/api/embed", model="embedder", input=text, options={"num_ctx": 16})
    want = openai_vectors(client, [text], truncate_prompt_tokens=16)
    assert np.abs(np.array(body["embeddings"]) - want).max() <= MAX_ABS
    assert body["prompt_eval_count"] == 16
    message = error(client, "/api/embed", 400, model="embedder", input="x", options={"num_ctx": 65})
    assert "num_ctx" in message and "64" in message


def test_dimensions_keep_the_first_values_renormalised(client: TestClient) -> None:
    texts = EMBEDDER["sentences"][:2]
    body = post(client, "/api/embed", model="embedder", input=texts, dimensions=8)
    got = np.array(body["embeddings"])
    assert got.shape == (2, 8)
    assert np.abs(got - openai_vectors(client, texts, dimensions=8)).max() <= MAX_ABS
    message = error(client, "/api/embed", 400, model="embedder", input="x", dimensions=33)
    assert "dimensions" in message and "32" in message


@pytest.mark.parametrize("path", ["/api/embed", "/api/embeddings"])
def test_a_generator_or_a_reranker_named_is_a_400_naming_its_kind(
    client: TestClient, path: str
) -> None:
    said = {"input": "hello"} if path == "/api/embed" else {"prompt": "hello"}
    message = error(client, path, 400, model="demo", **said)
    assert "'demo'" in message and "generator" in message
    message = error(client, path, 400, model="reranker", **said)
    assert "'reranker'" in message and "reranker" in message
    assert "llama3" in error(client, path, 404, model="llama3", **said)


def test_bad_bodies_are_400s_in_ollamas_shape(client: TestClient) -> None:
    sampling = error(
        client, "/api/embed", 400, model="embedder", input="x", options={"temperature": 0.5}
    )
    assert "temperature" in sampling and "samples nothing" in sampling
    unset = {"temperature": None, "top_k": None, "stop": None, "num_thread": 2}
    assert post(client, "/api/embed", model="embedder", input="x", options=unset)["embeddings"]
    assert "keep_alive" in error(
        client, "/api/embed", 400, model="embedder", input="x", keep_alive="soon"
    )
    assert "input" in error(client, "/api/embed", 400, model="embedder", input=[1, 2])
    assert "model" in error(client, "/api/embed", 400, input="x")
    ok = post(
        client,
        "/api/embed",
        model="embedder",
        input="x",
        keep_alive="5m",
        options={"num_thread": 2},
    )
    assert len(ok["embeddings"]) == 1


def test_listings_show_the_embedder_with_its_capability(client: TestClient) -> None:
    listed = {m["name"]: m for m in client.get("/api/tags").json()["models"]}
    assert set(listed) == {"demo", "embedder"}  # Ollama's API has no rerankers
    details = listed["embedder"]["details"]
    assert details["family"] == "bert" and details["format"] == "onnx"
    show = post(client, "/api/show", model="embedder")
    assert show["capabilities"] == ["embedding"]
    assert show["model_info"]["bert.embedding_length"] == 32
    assert show["model_info"]["bert.context_length"] == 64
    assert show["details"] == details
    assert post(client, "/api/show", model="demo")["capabilities"][0] == "completion"
    reranker = error(client, "/api/show", 400, model="reranker")
    assert "'reranker'" in reranker and "reranker model" in reranker
    running = {m["name"]: m for m in client.get("/api/ps").json()["models"]}
    assert running["embedder"]["context_length"] == 64
