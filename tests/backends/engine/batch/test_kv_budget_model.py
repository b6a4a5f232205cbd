"""The KV budget on a real model: the automatic one gives a small model its whole context;
a set one that gives a slot less refuses a longer prompt, naming the setting to raise."""

from __future__ import annotations

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.service import InferenceService
from backends.errors import ContextLengthExceeded
from config.settings import REPO_ROOT
from tests.backends.engine.helpers import request, run

pytestmark = pytest.mark.model

FULL = REPO_ROOT / "tests" / "models" / "phi3"  # full attention, a 2,048-token context


def budget_config(kv_cache_mib: float | str | None) -> ServiceConfig:
    model = ModelConfig(FULL, device="cpu", intra_op_threads=1, scheduler="batch")
    return ServiceConfig(
        ModelConfig(**{**model.__dict__, "kv_cache_mib": kv_cache_mib}), Limits(max_concurrency=8)
    )


def test_the_automatic_budget_gives_a_small_model_its_whole_context() -> None:
    async def body(service: InferenceService) -> int | None:
        return service.max_length

    assert ModelConfig(FULL).kv_cache_mib == "auto"  # the default
    assert run(budget_config("auto"), body) == 2048


def test_a_prompt_longer_than_a_slot_is_refused_naming_the_budget() -> None:
    async def body(service: InferenceService) -> str:
        assert service.max_length is not None and service.max_length < 2048
        prompt = " ".join(["river"] * service.max_length)  # more tokens than a slot holds
        with pytest.raises(ContextLengthExceeded) as exc:
            await (await service.submit(request(prompt, max_tokens=4))).result()
        return str(exc.value)

    message = run(budget_config(0.25), body)  # a quarter MiB over 8 slots: a few hundred tokens
    assert "GENAI_KV_CACHE_MIB" in message and "of the model's 2048" in message
