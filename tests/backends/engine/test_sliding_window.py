"""A sliding-window model (the committed Mistral and Gemma-2 test models, 64-token windows)
on the ``generator`` strategy: a request whose prompt and answer fit in fewer positions than
the window still gets a KV cache of the window (onnxruntime's attention refuses less), here a
seeded one, which reuses no cache and so used to ask for exactly what it needs and fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.service import InferenceService
from config.settings import REPO_ROOT
from tests.backends.engine.helpers import request, run

pytestmark = pytest.mark.model

MODELS = REPO_ROOT / "tests" / "models"


@pytest.mark.parametrize("name", ["mistral", "gemma2"])
def test_a_short_seeded_request_on_a_sliding_window_model(name: str) -> None:
    folder = MODELS / name
    assert 0 < _window(folder) <= 64  # far more than the 2-token prompt and 4 tokens asked
    cfg = ServiceConfig(
        ModelConfig(folder, device="cpu", intra_op_threads=1, scheduler="generator"), Limits()
    )

    async def body(service: InferenceService) -> list[tuple[str, int]]:
        out = []
        for _ in range(2):
            handle = await service.submit(
                request("hello there", max_tokens=4, temperature=0.8, seed=7, min_new_tokens=4)
            )
            result = await handle.result()
            out.append((result.choices[0].text, result.choices[0].completion_tokens))
        return out

    first, again = run(cfg, body)
    assert first[1] == 4 and first == again  # all four tokens, and the seed holds


def _window(folder: Path) -> int:
    from backends.models.folder import inspect_model_folder

    return inspect_model_folder(folder).sliding_window
