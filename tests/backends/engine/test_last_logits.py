"""What a model with the last position's logits only cannot do, decided without loading it:
the server's speculation is turned off with one log line, a request's ``speculative`` is
refused naming the field (by the batch strategy, finally: its generator fallback is not made
for it), and ``GENAI_SCHEDULER=engine`` is refused at start. tests/backends/engine/batch/
test_last_logits.py runs the model."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from backends.config import ModelConfig
from backends.engine import last_logits
from backends.engine.choose import strategy_factory
from backends.engine.fallback import WithFallback
from backends.engine.scheduler import Refusal
from backends.errors import StartupError
from backends.types import GenerationParams, Speculative

pytestmark = pytest.mark.unit

PRUNED, FULL = SimpleNamespace(last_logits_only=True), SimpleNamespace(last_logits_only=False)


def test_the_servers_speculation_is_turned_off_once_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    own = {"batch": Speculative(8, 2, 4), "generator": Speculative(8, 2, 4)}
    off = last_logits.server_speculation(PRUNED, own)  # type: ignore[arg-type]
    assert off == {"batch": Speculative(0, 2, 4), "generator": Speculative(0, 2, 4)}
    [line] = [r.getMessage() for r in caplog.records]
    assert "GENAI_SPECULATIVE_TOKENS=8" in line and "--all-logits" in line
    assert last_logits.server_speculation(FULL, own) == own  # type: ignore[arg-type]
    none = {"batch": Speculative(0, 2, 4), "generator": Speculative(0, 2, 4)}
    assert last_logits.server_speculation(PRUNED, none) == none  # type: ignore[arg-type]
    assert len(caplog.records) == 1  # nothing said where nothing was on
    last_logits.server_speculation(PRUNED, own, asked=False)  # type: ignore[arg-type]
    assert len(caplog.records) == 1  # the default on: a note, not a warning


@pytest.mark.parametrize(
    ("asked", "refused"),
    [(Speculative(), True), (Speculative(4), True), (Speculative(0), False), (None, False)],
)
def test_a_request_asking_for_speculation_is_refused_naming_the_field(
    asked: Speculative | None, refused: bool
) -> None:
    params = GenerationParams(max_new_tokens=8, speculative=asked)
    why = last_logits.refusal(PRUNED, params)  # type: ignore[arg-type]
    assert (why is not None) is refused
    if why is not None:
        assert why.param == "speculative" and "--all-logits" in why.why
    assert last_logits.refusal(FULL, params) is None  # type: ignore[arg-type]


class _Primary:
    name, max_length = "batch", 64

    def __init__(self, why: Any) -> None:
        self.why = why

    def unsupported(self, params: GenerationParams, prompt_tokens: int = 0) -> Any:
        return self.why


def test_a_refusal_of_the_primary_is_final() -> None:
    made: list[str] = []

    def fallback() -> Any:
        made.append("generator")
        return _Primary(None)

    params = GenerationParams(max_new_tokens=8)
    refusal = Refusal("speculative", "no")
    assert WithFallback(_Primary(refusal), fallback).unsupported(params) is refusal  # type: ignore[arg-type]
    assert not made  # no second copy of the weights loaded to refuse it
    assert WithFallback(_Primary("num_beams"), fallback).unsupported(params) is None  # type: ignore[arg-type]
    assert made == ["generator"]


def test_the_engine_scheduler_is_refused_at_start() -> None:
    model = SimpleNamespace(dynamic_batching=False, folder=PRUNED)
    make = strategy_factory(ModelConfig(Path("m"), scheduler="engine"), slots=4)
    with pytest.raises(StartupError, match="GENAI_SCHEDULER=engine cannot serve it.*last"):
        make(model)  # type: ignore[arg-type]
