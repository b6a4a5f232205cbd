"""A model folder's own sampling defaults: its genai_config.json search section, read as a plain
og.Generator on the folder reads it when nothing is set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backends.models.folder import ModelFolder
from backends.models.sampling import SamplingDefaults, search_defaults
from config.settings import DEMO_MODEL_DIR

pytestmark = pytest.mark.unit

GREEDY = SamplingDefaults(temperature=0.0, top_p=1.0, top_k=0, repetition_penalty=1.0)


def folder_with(tmp_path: Path, search: dict[str, Any]) -> ModelFolder:
    config = json.loads((DEMO_MODEL_DIR / "genai_config.json").read_text())
    config["search"] = search
    (tmp_path / "genai_config.json").write_text(json.dumps(config))
    return ModelFolder(tmp_path, json.loads((tmp_path / "genai_config.json").read_text()))


def test_a_folder_that_samples_gives_its_own_temperature_and_cuts(tmp_path: Path) -> None:
    search = {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
    assert folder_with(tmp_path, search).sampling_defaults == SamplingDefaults(0.6, 0.95, 20)


def test_a_folder_that_does_not_sample_is_greedy(tmp_path: Path) -> None:
    search = {"do_sample": False, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
    assert folder_with(tmp_path, search).sampling_defaults == GREEDY


def test_the_demo_model_is_greedy() -> None:
    config = json.loads((DEMO_MODEL_DIR / "genai_config.json").read_text())
    assert ModelFolder(DEMO_MODEL_DIR, config).sampling_defaults == GREEDY


@pytest.mark.parametrize(
    ("search", "expected"),
    [
        ({}, GREEDY),  # og: do_sample is off unless said
        # og's own defaults: temperature 1, top_k 50, top_p 0 (no cut)
        ({"do_sample": True}, SamplingDefaults(1.0, 1.0, 50)),
        ({"do_sample": True, "top_p": 1.0, "top_k": 0}, SamplingDefaults(1.0, 1.0, 0)),
        # og picks the top token at top_k 1 or temperature 0, sampling or not
        ({"do_sample": True, "top_k": 1, "temperature": 0.7}, GREEDY),
        ({"do_sample": True, "temperature": 0.0}, GREEDY),
        # the repetition penalty applies either way
        ({"repetition_penalty": 1.1}, SamplingDefaults(repetition_penalty=1.1)),
        (
            {"do_sample": True, "temperature": 0.7, "repetition_penalty": 1.05},
            SamplingDefaults(0.7, 1.0, 50, 1.05),
        ),
    ],
)
def test_og_semantics(search: dict[str, Any], expected: SamplingDefaults) -> None:
    assert search_defaults(search) == expected
