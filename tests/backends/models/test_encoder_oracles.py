"""The encoder test models' expected.json re-derived from their committed weights, where the
build tools (torch, transformers, sentence-transformers) are installed; elsewhere the committed
record is the oracle (tests/app/test_embeddings.py)."""

from __future__ import annotations

import importlib.util
import sys
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


def script(name: str) -> Any:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("build_embedder", "st-embedder"),
        ("build_decoder_embedder", "decoder-embedder"),
        ("build_reranker", "reranker"),
    ],
)
def test_expected_values_are_the_reference_libraries_on_the_committed_weights(
    name: str, folder: str
) -> None:
    assert script(name).check(HUB / folder) == 0
