"""A model folder's summary for model listings: parameters counted off the ONNX initializers,
the quantization level, size and digest."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from backends.models.folder import inspect_model_folder
from backends.models.onnx_graph import Initializer
from backends.models.summary import count_parameters, parameter_size, summarize
from config.settings import DEMO_MODEL_DIR

pytestmark = pytest.mark.unit


def test_the_demo_models_parameters_are_counted_off_its_int4_graph() -> None:
    # vocab 1024 x hidden 256 (embeddings tied to lm_head) + 2 layers of q/k/v (256+64+64
    # rows), o (256), gate/up (512 each), down (256 x 512) + 5 norms of 256.
    expected = 1024 * 256 + 2 * 256 * (256 + 64 + 64 + 256 + 512 + 512 + 512) + 5 * 256
    summary = summarize(inspect_model_folder(DEMO_MODEL_DIR))
    assert (summary.parameters, summary.quantization) == (expected, "Q4")
    files = [f for f in DEMO_MODEL_DIR.rglob("*") if f.is_file()]
    assert summary.size == sum(f.stat().st_size for f in files)
    config = (DEMO_MODEL_DIR / "genai_config.json").read_bytes()
    assert summary.digest == hashlib.sha256(config).hexdigest()


def test_a_float_graph_is_named_by_its_main_type_and_caches_are_not_parameters() -> None:
    weights = [
        Initializer("embed", "float16", 1000),
        Initializer("norm", "float", 10),
        Initializer("cos_cache", "float", 500),
        Initializer("proj.MatMul.weight_Q8", "uint8", 40),
        Initializer("proj.MatMul.weight_scales", "float", 4),
    ]
    assert count_parameters(weights[:3]) == (1010, "F16")
    assert count_parameters(weights) == (1050, "Q8")


@pytest.mark.parametrize(
    ("count", "told"),
    [
        (None, "unknown"),
        (999, "999"),
        (139_584, "139.6K"),
        (135_200_000, "135.2M"),
        (7.6e9, "7.6B"),
    ],
)
def test_parameter_sizes_read_as_ollama_writes_them(count: int | None, told: str) -> None:
    assert parameter_size(None if count is None else int(count)) == told


def test_an_unreadable_graph_is_unknown_not_an_error(tmp_path: Path) -> None:
    from backends.models.folder import ModelFolder

    (tmp_path / "model.onnx").write_bytes(b"not a model")
    summary = summarize(ModelFolder(tmp_path, {"model": {"decoder": {"filename": "model.onnx"}}}))
    assert (summary.parameters, summary.quantization) == (None, "unknown")
