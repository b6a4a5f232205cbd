"""The in-process client on encoder folders: embed() and rerank() give the oracle's values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from backends.errors import InvalidRequest
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
