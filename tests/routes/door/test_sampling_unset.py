"""Every door tells the core which sampling fields its client left out (the core fills them with
the model's defaults), and keeps its own documented default for them in the request (what
GENAI_SAMPLING_DEFAULTS=api serves). A value the client sends is never left out, even one equal
to the door's default. Every door takes ``min_p`` and the ``speculative`` extension."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app_onnx_genai import create_app
from backends.core.request import GenerationRequest
from backends.models.sampling import DEFAULTED_FIELDS
from backends.types import Speculative
from config.settings import DEMO_MODEL_DIR, Settings
from tests.routes.fakes import FakeHandle, FakeModels, end, said

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "Hi"}]
# path → (a body that sets no sampling, where the body's sampling goes, the door's own defaults
# (temperature, top_p, top_k, repetition_penalty))
DOORS: dict[str, tuple[dict[str, Any], str | None, tuple[float, float, int, float]]] = {
    "/v1/chat": ({"messages": MESSAGES}, None, (0.7, 1.0, 0, 1.0)),
    "/generate": ({"prompt": "Once"}, None, (0.7, 1.0, 0, 1.0)),
    "/v1/chat/completions": ({"messages": MESSAGES}, None, (1.0, 1.0, 0, 1.0)),
    "/v1/completions": ({"prompt": "Once"}, None, (1.0, 1.0, 0, 1.0)),
    "/v1/responses": ({"input": "Hello!"}, None, (1.0, 1.0, 0, 1.0)),
    "/v1/messages": (
        {"model": "onnx-genai", "messages": MESSAGES, "max_tokens": 8},
        None,
        (1.0, 1.0, 0, 1.0),
    ),
    "/api/chat": (
        {"model": "onnx-genai", "messages": MESSAGES, "stream": False},
        "options",
        (0.8, 0.9, 40, 1.0),
    ),
    "/api/generate": (
        {"model": "onnx-genai", "prompt": "Once", "stream": False},
        "options",
        (0.8, 0.9, 40, 1.0),
    ),
}


def submitted(path: str, sampling: dict[str, Any]) -> GenerationRequest:
    body, nest, _ = DOORS[path]
    body = {**body, nest: sampling} if nest else {**body, **sampling}
    models: Any = FakeModels(FakeHandle([said("Hi"), end()]))
    app = create_app(Settings.load(model_dir=DEMO_MODEL_DIR), models)
    resp = TestClient(app).post(path, json=body)
    assert resp.status_code == 200, resp.text
    [request] = models.submitted
    return request


@pytest.mark.parametrize("path", sorted(DOORS))
def test_a_body_that_sets_no_sampling_leaves_it_all_to_the_core(path: str) -> None:
    request = submitted(path, {})
    assert request.unset == DEFAULTED_FIELDS
    s = request.sampling
    assert (s.temperature, s.top_p, s.top_k, s.repetition_penalty) == DOORS[path][2]


@pytest.mark.parametrize("path", sorted(DOORS))
def test_a_value_the_client_sends_is_its_own_even_the_doors_default(path: str) -> None:
    temperature = DOORS[path][2][0]
    request = submitted(path, {"temperature": temperature, "top_k": 5})
    assert request.unset == DEFAULTED_FIELDS - {"temperature", "top_k"}
    assert (request.sampling.temperature, request.sampling.top_k) == (temperature, 5)


@pytest.mark.parametrize("path", ["/v1/messages", "/api/chat"])
def test_null_is_left_out(path: str) -> None:
    assert submitted(path, {"top_p": None}).unset == DEFAULTED_FIELDS


def test_ollamas_repeat_penalty_is_the_cores_repetition_penalty() -> None:
    request = submitted("/api/chat", {"repeat_penalty": 1.0})
    assert request.unset == DEFAULTED_FIELDS - {"repetition_penalty"}


@pytest.mark.parametrize("path", sorted(DOORS))
def test_every_door_takes_min_p_and_a_speculative_override(path: str) -> None:
    asked = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3}
    sampling = submitted(path, {"min_p": 0.1, "speculative": asked}).sampling
    assert sampling.min_p == 0.1
    assert sampling.speculative == Speculative(5, None, 3)
    plain = submitted(path, {}).sampling
    assert (plain.min_p, plain.speculative) == (0.0, None)


@pytest.mark.parametrize(
    ("asked", "field"),
    [
        ({"method": "eagle"}, "method"),
        ({"num_speculative_tokens": 33}, "num_speculative_tokens"),
        ({"prompt_lookup_min": 0}, "prompt_lookup_min"),
        ({"prompt_lookup_min": 4, "prompt_lookup_max": 2}, "speculative"),
        ({"draft_model": "x"}, "draft_model"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/api/chat"])
def test_a_speculative_override_out_of_bounds_is_a_400_naming_it(
    path: str, asked: dict[str, Any], field: str
) -> None:
    body, nest, _ = DOORS[path]
    body = {**body, nest: {"speculative": asked}} if nest else {**body, "speculative": asked}
    models: Any = FakeModels(FakeHandle([said("Hi"), end()]))
    app = create_app(Settings.load(model_dir=DEMO_MODEL_DIR), models)
    resp = TestClient(app).post(path, json=body)
    assert resp.status_code == 400, resp.text
    assert field in resp.text and "speculative" in resp.text
