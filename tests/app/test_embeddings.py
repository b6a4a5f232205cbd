"""Embeddings, rerank and score through the real app, three encoders and a generator served
from one models file; every vector and score checked against the oracle recorded when the
model was built (SentenceTransformer.encode, the cross-encoder's Hugging Face logits)."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.conftest import assert_error, make_client, wait_ready

pytestmark = pytest.mark.model

HUB = REPO_ROOT / "tests" / "hub_models"
EMBEDDER = json.loads((HUB / "st-embedder" / "expected.json").read_text())
DECODER = json.loads((HUB / "decoder-embedder" / "expected.json").read_text())
RERANKER = json.loads((HUB / "reranker" / "expected.json").read_text())
# Float results differ a little across CPU kinds and batch shapes; these hold on both.
MAX_ABS = 1e-4
MIN_COSINE = 0.9999
LOGIT_ABS = 1e-3

MODELS = f"""
[[models]]
name = "demo"
path = "{DEMO_MODEL_DIR}"
scheduler = "generator"

[[models]]
name = "embedder"
path = "{HUB / "st-embedder"}"
max_inputs = 16

[[models]]
name = "reranker"
path = "{HUB / "reranker"}"

[[models]]
name = "qwen-embed"
path = "{HUB / "decoder-embedder"}"
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("models") / "models.toml"
    path.write_text(MODELS)
    with make_client(models_file=path, intra_op_threads=1) as client:
        wait_ready(client)
        yield client


def embed(client: TestClient, **body: Any) -> dict[str, Any]:
    resp = client.post("/v1/embeddings", json={"model": "embedder", **body})
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def vectors(body: dict[str, Any]) -> list[np.ndarray]:
    return [np.array(d["embedding"], dtype=np.float32) for d in body["data"]]


def assert_close(got: list[np.ndarray], want: list[list[float]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        w_arr = np.array(w, dtype=np.float32)
        assert g.shape == w_arr.shape
        assert np.abs(g - w_arr).max() <= MAX_ABS
        cosine = float(g @ w_arr / (np.linalg.norm(g) * np.linalg.norm(w_arr)))
        assert cosine >= MIN_COSINE


def test_models_and_healthz_show_each_kind(client: TestClient) -> None:
    cards = {m["id"]: m for m in client.get("/v1/models").json()["data"]}
    assert {k: c["kind"] for k, c in cards.items()} == {
        "demo": "generator",
        "embedder": "embedding",
        "reranker": "reranker",
        "qwen-embed": "embedding",
    }
    assert cards["embedder"]["max_model_len"] == 64
    assert client.get("/healthz").json()["kinds"]["reranker"] == "reranker"


@pytest.mark.parametrize(("model", "expected"), [("embedder", EMBEDDER), ("qwen-embed", DECODER)])
def test_embeddings_and_usage_match_the_oracle(
    client: TestClient, model: str, expected: dict[str, Any]
) -> None:
    body = embed(client, model=model, input=expected["sentences"])
    assert body["object"] == "list" and body["model"] == model
    assert [d["index"] for d in body["data"]] == list(range(len(expected["sentences"])))
    assert_close(vectors(body), expected["embeddings"])
    tokens = sum(expected["prompt_tokens"])
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    one = embed(client, model=model, input=expected["sentences"][3])  # a string alone
    assert_close(vectors(one), [expected["embeddings"][3]])


@pytest.mark.parametrize(("model", "expected"), [("embedder", EMBEDDER), ("qwen-embed", DECODER)])
@pytest.mark.parametrize("field", [{"prompt_name": "query"}, {"input_type": "query"}])
def test_named_query_prompt_applies(
    client: TestClient, model: str, expected: dict[str, Any], field: dict[str, str]
) -> None:
    body = embed(client, model=model, input=expected["sentences"], **field)
    assert_close(vectors(body), expected["query_embeddings"])


def test_base64_is_little_endian_float32_of_the_same_vector(client: TestClient) -> None:
    floats = vectors(embed(client, input=EMBEDDER["sentences"][:2]))
    packed = embed(client, input=EMBEDDER["sentences"][:2], encoding_format="base64")
    for item, want in zip(packed["data"], floats, strict=True):
        got = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        assert np.array_equal(got, want)


def test_dimensions_truncate_then_renormalise(client: TestClient) -> None:
    body = embed(client, input=EMBEDDER["sentences"], dimensions=8)
    want = [np.array(v[:8]) / np.linalg.norm(v[:8]) for v in EMBEDDER["embeddings"]]
    assert_close(vectors(body), [w.tolist() for w in want])
    for v in vectors(body):
        assert math.isclose(float(np.linalg.norm(v)), 1.0, rel_tol=1e-5)
    err = assert_error(
        client.post("/v1/embeddings", json={"model": "embedder", "input": "x", "dimensions": 33}),
        400,
        "dimensions",
    )
    assert "32" in err["message"]


def test_over_long_input_is_refused_by_index_unless_truncation_is_asked(
    client: TestClient,
) -> None:
    texts = ["short", EMBEDDER["long_text"]]
    err = assert_error(
        client.post("/v1/embeddings", json={"model": "embedder", "input": texts}), 400, "input"
    )
    assert "Input 1" in err["message"] and str(EMBEDDER["long_text_tokens"]) in err["message"]
    assert err["code"] == "context_length_exceeded"
    for ask in ({"truncate": True}, {"truncate_prompt_tokens": -1}, {"truncate_prompt_tokens": 64}):
        body = embed(client, input=texts, **ask)
        assert_close(vectors(body)[1:], [EMBEDDER["long_truncated_embedding"]])
        assert body["usage"]["prompt_tokens"] == _tokens("short") + 64
    assert_error(
        client.post(
            "/v1/embeddings",
            json={"model": "embedder", "input": "x", "truncate_prompt_tokens": 65},
        ),
        400,
        "truncate_prompt_tokens",
    )


def test_a_huge_input_is_cut_by_characters_or_refused_before_it_is_tokenized(
    client: TestClient,
) -> None:
    """Megabytes of text never become millions of tokens: with truncation the text is cut
    first where it surely holds more than the limit (the vector is the truncated oracle's);
    without, it is refused by its characters."""
    huge = EMBEDDER["long_text"] + " and more words" * 200_000  # 3 MB
    body = embed(client, input=["short", huge], truncate=True)
    assert_close(vectors(body)[1:], [EMBEDDER["long_truncated_embedding"]])
    assert body["usage"]["prompt_tokens"] == _tokens("short") + 64
    err = assert_error(
        client.post("/v1/embeddings", json={"model": "embedder", "input": ["short", huge]}),
        400,
        "input",
    )
    assert f"Input 1 has {len(huge)} characters" in err["message"]
    assert err["code"] == "context_length_exceeded"
    rerank = {"model": "reranker", "query": RERANKER["query"], "documents": ["d", huge]}
    err = assert_error(client.post("/v1/rerank", json=rerank), 400, "documents")
    assert "Document 1 with the query has" in err["message"] and "characters" in err["message"]
    cut = client.post("/v1/rerank", json={**rerank, "truncate": True})
    assert cut.status_code == 200 and cut.json()["usage"]["prompt_tokens"] <= 2 * 64


@pytest.mark.parametrize(
    ("path", "body", "param", "words"),
    [
        ("/v1/embeddings", {"input": "hi", "foo": 1}, "foo", "Extra inputs"),
        ("/v1/embeddings", {"input": "hi", "dimensions": True}, "dimensions", "integer"),
        ("/v1/embeddings", {"input": "hi", "dimensions": "8"}, "dimensions", "integer"),
        ("/v1/embeddings", {"input": [True, False]}, "input", "token ids (integers)"),
        ("/v1/embeddings", {"input": [[1, True]]}, "input", "token ids (integers)"),
        ("/v1/embeddings", {"input": "hi", "truncate": 1}, "truncate", "boolean"),
        ("/v1/rerank", {"query": "q", "documents": ["d"], "foo": 1}, "foo", "Extra inputs"),
        ("/v1/rerank", {"query": "q", "documents": [{"text": "d", "x": 1}]}, None, "Extra"),
        ("/v1/rerank", {"query": "q", "documents": ["d"], "top_n": "1"}, "top_n", "integer"),
        ("/v1/score", {"text_1": "a", "text_2": "b", "foo": 1}, "foo", "Extra inputs"),
        ("/v1/score", {"text_1": ["a", "b"], "text_2": ["c"] * 3}, "text_2", "text_1 has 2"),
    ],
)
def test_the_encoder_doors_refuse_unknown_fields_and_loose_types(
    client: TestClient, path: str, body: dict[str, Any], param: str | None, words: str
) -> None:
    err = assert_error(client.post(path, json=body), 400)
    assert words in err["message"] and "Value error" not in err["message"]
    if param is not None:
        assert err["param"] == param


def test_token_ids_embed_like_their_text(client: TestClient) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(HUB / "st-embedder" / "tokenizer.json"))
    ids = [tok.encode(t).ids for t in EMBEDDER["sentences"][:3]]
    body = embed(client, input=ids)
    assert_close(vectors(body), EMBEDDER["embeddings"][:3])
    single = embed(client, input=ids[0])
    assert_close(vectors(single), EMBEDDER["embeddings"][:1])
    err = assert_error(
        client.post("/v1/embeddings", json={"model": "embedder", "input": [[5, 100_000]]}),
        400,
        "input",
    )
    assert "100000" in err["message"] and "vocabulary" in err["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": []}, "inputs"),
        ({"input": ["a", ""]}, "input"),
        ({"input": ["a"] * 17}, "inputs"),
        ({"input": "a", "prompt_name": "nope"}, "prompt_name"),
        ({"input": "a", "input_type": "nope"}, "input_type"),
        ({"input": "a", "encoding_format": "int8"}, None),
        ({"input": [[]]}, "input"),
    ],
)
def test_bad_inputs_are_400s_and_the_next_request_is_served(
    client: TestClient, body: dict[str, Any], param: str | None
) -> None:
    resp = client.post("/v1/embeddings", json={"model": "embedder", **body})
    assert_error(resp, 400, param)
    assert_close(vectors(embed(client, input="hello")), [_plain("hello")])


def _tokens(text: str) -> int:
    from tokenizers import Tokenizer

    return len(Tokenizer.from_file(str(HUB / "st-embedder" / "tokenizer.json")).encode(text).ids)


def _plain(text: str) -> list[float]:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    folder = HUB / "st-embedder"
    ids = np.array([Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids])
    session = ort.InferenceSession(str(folder / "onnx" / "model.onnx"))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": 0 * ids}
    hidden = session.run(None, feeds)[0][0].mean(axis=0)
    return (hidden / np.linalg.norm(hidden)).tolist()


def test_a_request_to_the_wrong_kind_names_the_kind(client: TestClient) -> None:
    chat = {"model": "embedder", "messages": [{"role": "user", "content": "hi"}]}
    err = assert_error(client.post("/v1/chat/completions", json=chat), 400, "model")
    assert "embedding model" in err["message"] and err["code"] == "wrong_model_kind"
    err = assert_error(
        client.post("/v1/embeddings", json={"model": "demo", "input": "hi"}), 400, "model"
    )
    assert "generator model" in err["message"]
    err = assert_error(
        client.post("/v1/rerank", json={"model": "embedder", "query": "q", "documents": ["d"]}),
        400,
        "model",
    )
    assert "embedding model" in err["message"]
    err = assert_error(
        client.post("/v1/embeddings", json={"model": "reranker", "input": "hi"}), 400, "model"
    )
    assert "reranker model" in err["message"]


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v2/rerank"])
def test_rerank_orders_documents_by_the_cross_encoder_logits(client: TestClient, path: str) -> None:
    docs = RERANKER["documents"]
    body = {"model": "reranker", "query": RERANKER["query"], "documents": docs}
    resp = client.post(path, json=body)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    want = sorted(range(len(docs)), key=lambda i: -RERANKER["logits"][i])
    assert [r["index"] for r in out["results"]] == want
    for r in out["results"]:
        expected = sigmoid(RERANKER["logits"][r["index"]])
        assert abs(r["relevance_score"] - expected) <= LOGIT_ABS / 4
        assert r["document"] is None
    assert out["usage"]["prompt_tokens"] == sum(RERANKER["pair_tokens"])


def test_rerank_top_n_return_documents_and_document_objects(client: TestClient) -> None:
    docs = [{"text": d} for d in RERANKER["documents"]]
    body = {"query": RERANKER["query"], "documents": docs, "top_n": 2, "return_documents": True}
    resp = client.post("/v1/rerank", json=body)  # no model: the first reranker
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    best = sorted(range(len(docs)), key=lambda i: -RERANKER["logits"][i])[:2]
    assert [r["index"] for r in results] == best
    assert [r["document"]["text"] for r in results] == [RERANKER["documents"][i] for i in best]


def test_score_pairs_one_text_against_many_and_by_index(client: TestClient) -> None:
    docs = RERANKER["documents"][:3]
    resp = client.post(
        "/v1/score", json={"model": "reranker", "text_1": RERANKER["query"], "text_2": docs}
    )
    assert resp.status_code == 200, resp.text
    scores = [d["score"] for d in resp.json()["data"]]
    assert scores == pytest.approx([sigmoid(x) for x in RERANKER["logits"][:3]], abs=LOGIT_ABS)
    paired = client.post(
        "/v1/score", json={"text_1": [RERANKER["query"]] * 3, "text_2": docs}
    ).json()
    assert [d["score"] for d in paired["data"]] == pytest.approx(scores, abs=1e-5)
    assert_error(client.post("/v1/score", json={"text_1": ["a", "b"], "text_2": ["c"]}), 400)


@pytest.mark.parametrize(
    "body",
    [
        {"query": "q", "documents": []},
        {"query": "", "documents": ["d"]},
        {"query": "q", "documents": ["d", ""]},
        {"query": "q", "documents": ["d"], "top_n": 0},
        {"query": "q " * 100, "documents": ["d"]},  # 100 words: over 64 tokens
    ],
)
def test_bad_rerank_requests_are_400s(client: TestClient, body: dict[str, Any]) -> None:
    err = assert_error(client.post("/v1/rerank", json={"model": "reranker", **body}), 400)
    assert err["param"] in ("documents", "query", "top_n")
    ok = client.post("/v1/rerank", json={"model": "reranker", "query": "q", "documents": ["d"]})
    assert ok.status_code == 200


def test_metrics_count_encoder_requests(client: TestClient) -> None:
    from tests.conftest import metric

    embed(client, input="metrics")
    text = client.get("/metrics").text
    lines = [x for x in text.splitlines() if 'model="embedder"' in x]
    assert metric("\n".join(lines), "genai_prompt_tokens_total") > 0


def test_an_encoder_loads_and_unloads_at_runtime() -> None:
    with make_client(admin=True, intra_op_threads=1, model_root=REPO_ROOT) as client:
        wait_ready(client)
        folder = str(HUB / "st-embedder")
        loaded = client.post("/admin/models", json={"name": "late", "path": folder})
        assert loaded.status_code == 200, loaded.text
        assert loaded.json()["max_model_len"] == 64
        body = client.post("/v1/embeddings", json={"model": "late", "input": "hello"})
        assert_close(vectors(body.json()), [_plain("hello")])
        assert client.delete("/admin/models/late").status_code == 200
        gone = client.post("/v1/embeddings", json={"model": "late", "input": "hello"})
        assert_error(gone, 404, "model")


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/embeddings", {"model": "embedder", "input": ["x", EMBEDDER["long_text"]]}, "input"),
        ("/v1/rerank", {"query": "q", "documents": ["d", EMBEDDER["long_text"]]}, "documents"),
        ("/v1/score", {"text_1": "q", "text_2": ["d", EMBEDDER["long_text"]]}, "text_2"),
    ],
)
def test_an_over_long_input_names_the_doors_own_truncation_field(
    client: TestClient, path: str, body: dict[str, Any], param: str
) -> None:
    """The way out names the field this door cuts by, and no other door's (vLLM's score names
    its own text_2, not the rerank door's documents)."""
    err = assert_error(client.post(path, json=body), 400, param)
    assert err["message"].endswith("Shorten it, or ask for truncation (truncate_prompt_tokens).")
    assert err["code"] == "context_length_exceeded"
