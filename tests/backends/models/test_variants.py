"""Hub-layout folders: the variant (or ONNX file) for the execution provider, pinning one, and
clear errors. The layouts are built in a temp dir from the demo model (links to its files)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from backends.errors import StartupError
from backends.models.folder import inspect_model_folder
from backends.models.variants import (
    Candidate,
    choose,
    file_candidate,
    find_onnx_files,
    find_variant_folders,
    folder_candidate,
)
from tests.conftest import DEMO_CONTEXT

pytestmark = pytest.mark.unit

# Microsoft's repos (e.g. Phi-3-mini-4k-instruct-onnx) hold these, each a builder folder.
VARIANTS: dict[str, list[dict[str, object]]] = {
    "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4": [],
    "cpu_and_mobile/cpu-int4-rtn-block-32": [],
    "cpu_and_mobile/cpu-fp32": [],
    "cuda/cuda-fp16": [{"cuda": {"enable_cuda_graph": "0"}}],
    "cuda/cuda-int4-rtn-block-32": [{"cuda": {}}],
    "directml/directml-int4-awq-block-128": [{"dml": {}}],
}


def make_variant(demo: Path, folder: Path, provider_options: list[dict[str, object]]) -> None:
    folder.mkdir(parents=True)
    for item in demo.iterdir():
        if item.name != "genai_config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((demo / "genai_config.json").read_text())
    config["model"]["decoder"]["session_options"]["provider_options"] = provider_options
    (folder / "genai_config.json").write_text(json.dumps(config))


@pytest.fixture()
def repo(tmp_path: Path, demo_model_dir: Path) -> Path:
    root = tmp_path / "Phi-3-mini-4k-instruct-onnx"
    for rel, options in VARIANTS.items():
        make_variant(demo_model_dir, root / rel, options)
    (root / "README.md").write_text("a model card")
    return root


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("cpu", "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4"),
        ("cuda", "cuda/cuda-fp16"),
        ("directml", "directml/directml-int4-awq-block-128"),
    ],
)
def test_the_variant_for_the_provider(repo: Path, provider: str, expected: str) -> None:
    folder = inspect_model_folder(repo, provider=provider)
    assert folder.path == repo / expected
    assert folder.source == repo
    assert folder.origin.startswith(f"variant {expected}")
    assert folder.context_length == DEMO_CONTEXT


def test_the_choice_is_logged_with_its_reason(repo: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="genai.model"):
        inspect_model_folder(repo, provider="cpu")
    message = next(r.getMessage() for r in caplog.records if "model variant" in r.getMessage())
    assert "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4" in message
    assert "for cpu, int4 preferred" in message
    assert "cuda/cuda-fp16 (fp16, cuda)" in message  # the others are listed
    assert "GENAI_MODEL_VARIANT" in message


@pytest.mark.parametrize("pin", ["cuda/cuda-fp16", "cuda-fp16", "/cuda/cuda-fp16/"])
def test_a_pinned_variant_wins(repo: Path, pin: str) -> None:
    folder = inspect_model_folder(repo, provider="cpu", variant=pin)
    assert folder.path == repo / "cuda/cuda-fp16"
    assert "pinned by GENAI_MODEL_VARIANT" in folder.origin


def test_an_unknown_pin_lists_the_variants(repo: Path) -> None:
    with pytest.raises(StartupError) as exc:
        inspect_model_folder(repo, provider="cpu", variant="cuda-int8")
    text = str(exc.value)
    assert "GENAI_MODEL_VARIANT=cuda-int8 matches none" in text
    assert "directml/directml-int4-awq-block-128 (int4, directml)" in text


def test_no_variant_for_the_provider(repo: Path) -> None:
    with pytest.raises(StartupError, match="no variant for the webgpu execution provider") as exc:
        inspect_model_folder(repo, provider="webgpu")
    assert "GENAI_MODEL_VARIANT" in str(exc.value) and "GENAI_DEVICE" in str(exc.value)


def test_a_pin_on_a_plain_folder_is_ignored(
    demo_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="genai.model"):
        folder = inspect_model_folder(demo_model_dir, provider="cpu", variant="cuda-fp16")
    assert folder.path == demo_model_dir and folder.source is None
    assert "ignored" in caplog.text


def test_provider_from_config_when_the_path_says_only_gpu(
    tmp_path: Path, demo_model_dir: Path
) -> None:
    make_variant(demo_model_dir, tmp_path / "gpu" / "gpu-int4-awq-block-128", [{"dml": {}}])
    make_variant(demo_model_dir, tmp_path / "cpu-int4", [])
    found = [folder_candidate(tmp_path, f) for f in find_variant_folders(tmp_path)]
    assert found == [
        Candidate("cpu-int4", frozenset({"cpu"}), "int4"),
        Candidate("gpu/gpu-int4-awq-block-128", frozenset({"directml"}), "int4"),
    ]


def test_variants_are_found_three_levels_down_but_not_in_hidden_folders(tmp_path: Path) -> None:
    for rel in ("a/b/c", ".cache/x", "d"):
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "genai_config.json").write_text("{}")
    (tmp_path / "e/f/g/h").mkdir(parents=True)
    (tmp_path / "e/f/g/h/genai_config.json").write_text("{}")
    assert [f.relative_to(tmp_path).as_posix() for f in find_variant_folders(tmp_path)] == [
        "a/b/c",
        "d",
    ]


# transformers.js / onnx-community layout: one model, several precisions, in onnx/.
FILES = ["model.onnx", "model_fp16.onnx", "model_q4.onnx", "model_q4f16.onnx"]
FILES += ["model_quantized.onnx", "model_bnb4.onnx", "model_uint8.onnx"]


def files_repo(root: Path, names: list[str]) -> list[Candidate]:
    (root / "onnx").mkdir(parents=True)
    for name in names:
        (root / "onnx" / name).write_bytes(b"")
    return [file_candidate(root, f) for f in find_onnx_files(root)]


@pytest.mark.parametrize(
    ("provider", "names", "expected"),
    [
        ("cpu", FILES, "onnx/model_q4.onnx"),
        ("cuda", FILES, "onnx/model_fp16.onnx"),
        (
            "cpu",
            ["model.onnx", "model_quantized.onnx", "model_fp16.onnx"],
            "onnx/model_quantized.onnx",
        ),
        ("cpu", ["model.onnx", "model_fp16.onnx"], "onnx/model.onnx"),
        ("cpu", ["model.onnx"], "onnx/model.onnx"),
    ],
)
def test_onnx_file_for_the_provider(
    tmp_path: Path, provider: str, names: list[str], expected: str
) -> None:
    candidates = files_repo(tmp_path, names)
    chosen, why = choose(candidates, provider, None, tmp_path, "ONNX files")
    assert chosen.rel == expected
    assert ("the only one" in why) == (len(names) == 1)


@pytest.mark.parametrize("pin", ["onnx/model.onnx", "model.onnx", "model", "onnx/model"])
def test_a_pinned_onnx_file(tmp_path: Path, pin: str) -> None:
    chosen, why = choose(files_repo(tmp_path, FILES), "cpu", pin, tmp_path, "ONNX files")
    assert chosen.rel == "onnx/model.onnx" and pin in why


def test_file_precisions(tmp_path: Path) -> None:
    precisions = {c.rel.split("/")[-1]: c.precision for c in files_repo(tmp_path, FILES)}
    assert precisions == {
        "model.onnx": "fp32",
        "model_fp16.onnx": "fp16",
        "model_q4.onnx": "int4",
        "model_q4f16.onnx": "int4-fp16",
        "model_quantized.onnx": "int8",
        "model_bnb4.onnx": "int4-bnb",
        "model_uint8.onnx": "int8",
    }
