"""Which strategy a model gets: a paged-attention model (CUDA fp16/bf16, WebGPU builds) runs on
og's Engine only, and anything else is refused at startup with why, not at the first token
(on a GPU og.Generator fails there with "Invalid rank for input: input_ids")."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from backends.config import ModelConfig
from backends.engine.choose import auto_strategy, strategy_factory
from backends.errors import StartupError

pytestmark = pytest.mark.unit


def model(*, paged: bool, adapters: bool = False, images: bool = False) -> Any:
    return SimpleNamespace(
        dynamic_batching=paged,
        adapter_files={"a": Path("a.onnx_adapter")} if adapters else {},
        modalities=("text", "image") if images else ("text",),
        provider=SimpleNamespace(name="cuda"),
    )


@pytest.mark.parametrize("scheduler", ["generator", "batch"])
def test_a_scheduler_set_for_a_paged_model_is_refused_naming_the_setting(scheduler: str) -> None:
    make = strategy_factory(ModelConfig(Path("m"), scheduler=scheduler), slots=4)  # type: ignore[arg-type]
    with pytest.raises(StartupError, match=f"GENAI_SCHEDULER={scheduler} cannot serve it.*paged"):
        make(model(paged=True))


@pytest.mark.parametrize(
    ("adapters", "images", "what"), [(True, False, "LoRA adapters"), (False, True, "Images")]
)
def test_what_only_the_generator_does_is_refused_on_a_paged_model(
    adapters: bool, images: bool, what: str
) -> None:
    paged = model(paged=True, adapters=adapters, images=images)
    assert auto_strategy(paged) == "generator"
    make = strategy_factory(ModelConfig(Path("m")), slots=4)
    with pytest.raises(StartupError, match=f"{what} need og.Generator.*use_paged_attention"):
        make(paged)


def test_auto_gives_a_paged_model_the_engine() -> None:
    assert auto_strategy(model(paged=True)) == "engine"
    assert auto_strategy(model(paged=False)) == "generator"  # an accelerator, no paged graph
