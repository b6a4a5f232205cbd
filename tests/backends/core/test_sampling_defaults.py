"""The core fills the sampling a request left out with the loaded model's own defaults (its
folder's search section), and only under GENAI_SAMPLING_DEFAULTS=model; the handle says what
the choices ran with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.handle import RequestHandle
from backends.core.request import GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.models.sampling import DEFAULTED_FIELDS, SamplingDefaults
from backends.types import SamplingParams
from config.settings import DEMO_MODEL_DIR
from tests.backends.engine.helpers import run

pytestmark = pytest.mark.model

SAMPLES = {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
DOOR = SamplingParams(temperature=1.0, top_p=1.0, top_k=0)  # a door's own defaults


def sampling_model(tmp_path: Path) -> Path:
    """The demo model, its folder saying it samples (Qwen3's generation config, say)."""
    folder = tmp_path / "model"
    shutil.copytree(DEMO_MODEL_DIR, folder)
    config = json.loads((folder / "genai_config.json").read_text())
    config["search"].update(SAMPLES)
    (folder / "genai_config.json").write_text(json.dumps(config))
    return folder


def ran_with(folder: Path, request: GenerationRequest, **limits: str) -> SamplingParams:
    cfg = ServiceConfig(ModelConfig(folder, device="cpu"), Limits(**limits))  # type: ignore[arg-type]

    async def body(service: InferenceService) -> SamplingParams:
        handle: RequestHandle = await service.submit(request)
        await handle.result()
        return handle.sampling

    result: SamplingParams = run(cfg, body)
    return result


def test_what_the_client_left_out_is_the_models_own(tmp_path: Path) -> None:
    left_out = GenerationRequest(TextPrompt("a"), DOOR, max_tokens=2, unset=DEFAULTED_FIELDS)
    s = ran_with(sampling_model(tmp_path), left_out)
    assert (s.temperature, s.top_p, s.top_k, s.repetition_penalty) == (0.6, 0.95, 20, 1.0)


def test_an_explicit_value_wins(tmp_path: Path) -> None:
    unset = DEFAULTED_FIELDS - {"temperature"}
    request = GenerationRequest(TextPrompt("a"), DOOR, max_tokens=2, unset=unset)
    s = ran_with(sampling_model(tmp_path), request)
    assert (s.temperature, s.top_p, s.top_k) == (1.0, 0.95, 20)


def test_the_demo_model_is_greedy_when_nothing_is_said() -> None:
    request = GenerationRequest(TextPrompt("a"), DOOR, max_tokens=2, unset=DEFAULTED_FIELDS)
    assert ran_with(DEMO_MODEL_DIR, request).greedy


def test_api_keeps_the_doors_defaults(tmp_path: Path) -> None:
    request = GenerationRequest(TextPrompt("a"), DOOR, max_tokens=2, unset=DEFAULTED_FIELDS)
    assert ran_with(sampling_model(tmp_path), request, sampling_defaults="api") == DOOR


def test_the_service_says_which_defaults_are_in_force(tmp_path: Path) -> None:
    folder = sampling_model(tmp_path)

    async def defaults(service: InferenceService) -> SamplingDefaults | None:
        return service.sampling_defaults

    model = ServiceConfig(ModelConfig(folder, device="cpu"))
    assert run(model, defaults) == SamplingDefaults(0.6, 0.95, 20)
    api = ServiceConfig(ModelConfig(folder, device="cpu"), Limits(sampling_defaults="api"))
    assert run(api, defaults) is None
