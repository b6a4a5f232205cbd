"""The encoder test models' expected.json re-derived from their committed weights, where the
build tools (torch, transformers, sentence-transformers) are installed; elsewhere the committed
record is the oracle (tests/app/test_embeddings.py)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from config.settings import REPO_ROOT

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("torch", "sentence_transformers")),
        reason="re-deriving the oracles needs torch and sentence-transformers (build tools)",
    ),
]

HUB = REPO_ROOT / "tests" / "hub_models"


def kit(name: str) -> Any:
    return importlib.import_module(f"modelkit.encoders.{name}")


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("embedder", "st-embedder"),
        ("decoder_embedder", "decoder-embedder"),
        ("reranker", "reranker"),
    ],
)
def test_expected_values_are_the_reference_libraries_on_the_committed_weights(
    name: str, folder: str
) -> None:
    from modelkit.encoders.common import check

    assert check(HUB / folder, kit(name).record_of) == 0
