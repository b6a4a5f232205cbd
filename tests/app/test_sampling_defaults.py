"""A request that sets no sampling gets the model's own defaults, through every door: on the
demo model (its folder's search says greedy) an answer without a temperature is the oracle's
greedy one, token for token. A temperature the client sends is what the choices run with, and
GENAI_SAMPLING_DEFAULTS=api gives each door its own documented default back.

What a choice ran with is read off the core's handle (``RequestHandle.sampling``), so no check
depends on a machine's float bits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from backends.core.handle import RequestHandle
from backends.core.request import GenerationRequest
from backends.core.service import InferenceService
from backends.types import SamplingParams
from tests.app.test_doors import DOORS, Doors, Outcome, assert_agree, open_doors
from tests.conftest import DirectGenerator

pytestmark = pytest.mark.model

# Each door's own temperature: what a request without one ran with before, and under api.
API_TEMPERATURE = dict.fromkeys(DOORS, 1.0)
API_TEMPERATURE.update({n: 0.7 for n in DOORS if n.startswith(("/v1/chat", "/generate"))})
API_TEMPERATURE.update({n: 0.7 for n in DOORS if n.startswith("OnnxTextGenerator")})
API_TEMPERATURE.update({n: 0.8 for n in DOORS if n.startswith("/api/")})


@pytest.fixture(scope="module")
def doors(oracle: DirectGenerator) -> Iterator[Doors]:
    with open_doors(oracle) as d:
        yield d


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[SamplingParams]:
    """The sampling each submitted request's choices ran with, in order."""
    seen: list[SamplingParams] = []
    submit = InferenceService.submit

    async def recording(self: InferenceService, request: GenerationRequest) -> RequestHandle:
        handle = await submit(self, request)
        seen.append(handle.sampling)
        return handle

    monkeypatch.setattr(InferenceService, "submit", recording)
    return seen


def through(d: Doors, req: dict[str, Any], ran: list[SamplingParams]) -> dict[str, Any]:
    """Each door's outcome and the sampling it ran with."""
    out = {}
    for name, door in DOORS.items():
        before = len(ran)
        outcome = door(d, req)
        [sampling] = ran[before:]
        out[name] = (outcome, sampling)
    return out


def test_no_temperature_is_the_models_greedy_answer_on_every_door(
    doors: Doors, oracle: DirectGenerator, ran: list[SamplingParams]
) -> None:
    text, tokens = oracle.greedy(doors.prompt_text, 6)
    assert len(tokens) == 6, "the oracle stopped early; pick another prompt"
    seen = through(doors, {"max_tokens": 6}, ran)
    assert_agree({name: outcome for name, (outcome, _) in seen.items()}, Outcome(text, "length", 6))
    for name, (_, sampling) in seen.items():
        assert sampling.greedy and (sampling.top_k, sampling.top_p) == (0, 1.0), name


def test_a_temperature_the_client_sends_is_what_it_runs_with(
    doors: Doors, ran: list[SamplingParams]
) -> None:
    for name, (_, sampling) in through(
        doors, {"max_tokens": 2, "temperature": 1.0, "seed": 7}, ran
    ).items():
        assert (sampling.temperature, sampling.seed) == (1.0, 7), name


def test_the_responses_api_says_the_temperature_used(doors: Doors) -> None:
    body = {"input": "Hi", "max_output_tokens": 2}
    assert doors.client.post("/v1/responses", json=body).json()["temperature"] == 0.0
    sent = doors.client.post("/v1/responses", json={**body, "temperature": 0.5}).json()
    assert sent["temperature"] == 0.5


def test_api_gives_each_door_its_own_default_back(
    oracle: DirectGenerator, ran: list[SamplingParams]
) -> None:
    with open_doors(oracle, sampling_defaults="api") as d:
        seen = through(d, {"max_tokens": 2}, ran)
        show = d.client.post("/api/show", json={"model": "onnx-genai"}).json()["parameters"]
    for name, (_, sampling) in seen.items():
        assert sampling.temperature == API_TEMPERATURE[name], name
    assert show.startswith("temperature 0.8\ntop_k 40\ntop_p 0.9\nnum_ctx ")


def test_ollama_shows_the_models_defaults(doors: Doors) -> None:
    show = doors.client.post("/api/show", json={"model": "onnx-genai"}).json()
    assert show["parameters"].startswith("temperature 0\ntop_k 0\ntop_p 1\nnum_ctx ")
    assert "PARAMETER temperature 0\n" in show["modelfile"]
