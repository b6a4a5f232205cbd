"""The in-process client on encoder folders: embed() and rerank() give the oracle's values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from backends.errors import ContextLengthExceeded, InvalidRequest
from config.settings import REPO_ROOT
from in_process import OnnxTextGenerator

pytestmark = pytest.mark.model

HUB = REPO_ROOT / "tests" / "hub_models"


def test_embed() -> None:
    expected = json.loads((HUB / "st-embedder" / "expected.json").read_text())
    with OnnxTextGenerator(HUB / "st-embedder", intra_op_threads=1) as client:
        got = client.embed(expected["sentences"])
        query = client.embed(expected["sentences"][0], input_type="query")
        short = client.embed(expected["sentences"][0], dimensions=4)
        with pytest.raises(InvalidRequest, match="embedding model"):
            client.generate("hi")
        with pytest.raises(InvalidRequest, match="embedding model"):
            client.rerank("q", ["d"])
    assert np.abs(np.array(got) - np.array(expected["embeddings"])).max() <= 1e-4
    assert np.abs(np.array(query[0]) - expected["query_embeddings"][0]).max() <= 1e-4
    assert len(short[0]) == 4 and math.isclose(float(np.linalg.norm(short[0])), 1, rel_tol=1e-5)


def test_rerank() -> None:
    expected = json.loads((HUB / "reranker" / "expected.json").read_text())
    with OnnxTextGenerator(HUB / "reranker", intra_op_threads=1) as client:
        ranked = client.rerank(expected["query"], expected["documents"], top_n=3)
    logits = expected["logits"]
    assert [r["index"] for r in ranked] == sorted(range(6), key=lambda i: -logits[i])[:3]
    for r in ranked:
        assert r["relevance_score"] == pytest.approx(
            1 / (1 + math.exp(-logits[r["index"]])), abs=2.5e-4
        )


def test_errors_name_the_clients_own_arguments() -> None:
    """embed()'s texts and truncate; rerank()'s documents, and no truncation it has not got."""
    long_text = json.loads((HUB / "st-embedder" / "expected.json").read_text())["long_text"]
    with OnnxTextGenerator(HUB / "st-embedder", intra_op_threads=1) as client:
        with pytest.raises(InvalidRequest) as empty:
            client.embed(["a", ""])
        with pytest.raises(ContextLengthExceeded) as long:
            client.embed(["a", long_text])
    assert (empty.value.param, empty.value.message) == ("texts", "texts[1] is empty.")
    assert long.value.param == "texts"
    assert long.value.message.endswith("Shorten it, or ask for truncation (truncate).")
    with OnnxTextGenerator(HUB / "reranker", intra_op_threads=1) as client:
        with pytest.raises(ContextLengthExceeded) as long:
            client.rerank("q", ["d", long_text])
    assert long.value.param == "documents" and long.value.message.endswith("Shorten it.")
