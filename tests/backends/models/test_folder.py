from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from backends.errors import StartupError
from backends.models.folder import inspect_model_folder
from tests.conftest import DEMO_CONTEXT

pytestmark = pytest.mark.unit


@pytest.fixture()
def model_copy(tmp_path: Path, demo_model_dir: Path) -> Path:
    dst = tmp_path / "m"
    shutil.copytree(demo_model_dir, dst)
    return dst


def test_demo_folder_is_valid(demo_model_dir: Path) -> None:
    folder = inspect_model_folder(demo_model_dir)
    assert folder.context_length == DEMO_CONTEXT
    assert folder.model_type == "mistral"
    assert "default" in folder.chat_templates


@pytest.mark.parametrize(
    ("remove", "needle"),
    [
        ("genai_config.json", "genai_config.json"),
        ("model.onnx", "model.onnx"),
        ("tokenizer.json", "tokenizer"),
    ],
)
def test_missing_file_is_named(model_copy: Path, remove: str, needle: str) -> None:
    (model_copy / remove).unlink()
    with pytest.raises(StartupError) as exc:
        inspect_model_folder(model_copy)
    assert needle in str(exc.value)
    assert "A GenAI model folder holds" in str(exc.value)


def test_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="does not exist"):
        inspect_model_folder(tmp_path / "nowhere")


def test_bad_json(model_copy: Path) -> None:
    (model_copy / "genai_config.json").write_text("{not json")
    with pytest.raises(StartupError, match="not valid JSON"):
        inspect_model_folder(model_copy)


def test_template_from_tokenizer_config(model_copy: Path) -> None:
    (model_copy / "chat_template.jinja").unlink()
    assert not inspect_model_folder(model_copy).chat_templates
    cfg = json.loads((model_copy / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{{ messages[0]['content'] }}"
    (model_copy / "tokenizer_config.json").write_text(json.dumps(cfg))
    templates = inspect_model_folder(model_copy).chat_templates
    assert templates == {"default": "{{ messages[0]['content'] }}"}


MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.mark.parametrize(
    ("folder", "last_only"),
    [("qwen2-last-logits", True), ("qwen2", False), ("demo-fp32", False)],
)
def test_last_logits_only_is_read_off_the_graph(folder: str, last_only: bool) -> None:
    """The logits output's sequence dimension: a fixed 1 (prune_lm_head), or every position."""
    assert inspect_model_folder(MODELS / folder).last_logits_only is last_only


def test_last_logits_only_follows_the_configured_output_name(tmp_path: Path) -> None:
    dst = tmp_path / "m"
    shutil.copytree(MODELS / "qwen2-last-logits", dst)
    config = json.loads((dst / "genai_config.json").read_text())
    config["model"]["decoder"]["outputs"]["logits"] = "no_such_output"
    (dst / "genai_config.json").write_text(json.dumps(config))
    assert not inspect_model_folder(dst).last_logits_only
    (dst / "model.onnx").write_bytes(b"not a model")  # unreadable: og says why when it loads
    config["model"]["decoder"]["outputs"]["logits"] = "logits"
    (dst / "genai_config.json").write_text(json.dumps(config))
    assert not inspect_model_folder(dst).last_logits_only
