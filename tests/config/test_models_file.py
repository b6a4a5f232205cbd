"""The models file and the settings, as plain values for the core: a model's fields over the
server-wide model settings, paths relative to the file, clear errors for a bad file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from backends.config import Limits, ModelConfig, service_configs
from config.models_file import ModelEntry, model_fields, served_model_fields
from config.settings import DEMO_MODEL_DIR, Settings, SettingsError

pytestmark = pytest.mark.unit

TWO_MODELS = f"""
[[models]]
name = "demo"
path = "{DEMO_MODEL_DIR}"
scheduler = "generator"

[[models]]
name = "qwen"
path = "{DEMO_MODEL_DIR}"
scheduler = "batch"
max_length = 512
"""


def models_file(tmp_path: Path, text: str, suffix: str = ".toml") -> Path:
    path = tmp_path / f"models{suffix}"
    path.write_text(text)
    return path


def test_the_fields_are_the_cores_names() -> None:
    settings = Settings.load(model_dir=DEMO_MODEL_DIR)
    names = {f.name for f in dataclasses.fields(ModelConfig)}
    assert set(model_fields(settings.model)) == names
    assert set(settings.server.limits()) == {f.name for f in dataclasses.fields(Limits)}


def test_one_model_without_a_models_file() -> None:
    settings = Settings.load(model_dir=DEMO_MODEL_DIR, model_name="m", max_concurrency=3)
    [config] = service_configs(served_model_fields(settings), settings.server.limits())
    assert (config.model.name, config.model.path) == ("m", DEMO_MODEL_DIR)
    assert config.limits.max_concurrency == 3


def test_two_models_keep_their_own_fields(tmp_path: Path) -> None:
    settings = Settings.load(models_file=models_file(tmp_path, TWO_MODELS), scheduler="engine")
    demo, qwen = service_configs(served_model_fields(settings), settings.server.limits())
    assert (demo.model.name, demo.model.scheduler, demo.model.max_length) == (
        "demo",
        "generator",
        None,
    )
    assert (qwen.model.name, qwen.model.scheduler, qwen.model.max_length) == ("qwen", "batch", 512)


@pytest.mark.parametrize(
    ("text", "suffix", "problem"),
    [
        ('{"models": []}', ".json", "models"),
        (TWO_MODELS.replace('"qwen"', '"demo"'), ".toml", "used twice"),
        (TWO_MODELS + 'colour = "red"\n', ".toml", "colour"),
        ("[[models]]\nname = 'a'\n", ".toml", "path"),
        ("not toml [", ".toml", "not valid toml"),
    ],
)
def test_a_bad_models_file_is_a_start_up_error(
    tmp_path: Path, text: str, suffix: str, problem: str
) -> None:
    settings = Settings.load(models_file=models_file(tmp_path, text, suffix))
    with pytest.raises(SettingsError, match=problem):
        served_model_fields(settings)


def test_unset_fields_take_the_model_settings_and_paths_are_relative(tmp_path: Path) -> None:
    (tmp_path / "m").symlink_to(DEMO_MODEL_DIR)
    path = models_file(
        tmp_path,
        json.dumps(
            {"models": [{"name": "a", "path": "m", "adapters": {"a-lora": "x.onnx_adapter"}}]}
        ),
        ".json",
    )
    settings = Settings.load(models_file=path, prefill_chunk=64, device="cpu")
    [config] = service_configs(served_model_fields(settings), settings.server.limits())
    assert config.model.path == tmp_path / "m" and config.model.prefill_chunk == 64
    assert config.model.device == "cpu" and config.model.adapters == {
        "a-lora": tmp_path / "x.onnx_adapter"
    }


@pytest.mark.parametrize("mib", [0, 2.0**31, 8.39e307])
def test_a_kv_budget_out_of_range_is_refused(mib: float) -> None:
    with pytest.raises(ValidationError, match="kv_cache_mib"):
        ModelEntry(name="m", path=Path("m"), kv_cache_mib=mib)
    with pytest.raises(ValidationError, match="kv_cache_mib"):
        Settings.load(kv_cache_mib=mib)
