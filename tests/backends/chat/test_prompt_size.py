"""Prompt size: a prompt that cannot fit is refused before it is tokenized, and a very large
one is tokenized in the prompt worker process while other streams go on."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from backends.chat.prompt_worker import THRESHOLD_CHARS, PromptWorker
from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.request import ChatPrompt, GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.errors import ContextLengthExceeded
from backends.models.loader import LoadedModel, load_model
from backends.types import SamplingParams
from config.settings import DEMO_MODEL_DIR
from tests.backends.engine.helpers import run

pytestmark = pytest.mark.model


def huge_context_model(tmp_path: Path) -> Path:
    """The demo model, told its context is a million tokens: legal prompts get very large."""
    folder = tmp_path / "model"
    shutil.copytree(DEMO_MODEL_DIR, folder)
    config = json.loads((folder / "genai_config.json").read_text())
    config["model"]["context_length"] = config["search"]["max_length"] = 1_000_000
    (folder / "genai_config.json").write_text(json.dumps(config))
    return folder


class CountingTokenizer:
    """The real tokenizer, counting encode calls."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.encodes = 0

    def encode(self, text: str) -> Any:
        self.encodes += 1
        return self._tokenizer.encode(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


def test_a_prompt_that_cannot_fit_is_refused_by_its_length_alone() -> None:
    config = ServiceConfig(ModelConfig(DEMO_MODEL_DIR, device="cpu"))
    counting: list[CountingTokenizer] = []

    def loader(cfg: ModelConfig) -> LoadedModel:
        model = load_model(cfg)
        counting.append(CountingTokenizer(model.tokenizer))
        model.tokenizer = counting[0]
        return model

    async def body() -> ContextLengthExceeded:
        service = InferenceService(config, loader=loader)
        await service.start()
        try:
            await (
                await service.submit(GenerationRequest(TextPrompt("a" * 100), max_tokens=4))
            ).result()
            with pytest.raises(ContextLengthExceeded) as exc:
                await service.submit(GenerationRequest(TextPrompt("a" * 4_000_000), max_tokens=4))
            return exc.value
        finally:
            await service.stop()

    error = asyncio.run(body())
    assert error.param == "prompt" and "4000000 characters" in error.message
    assert counting[0].encodes == 1  # the short prompt's; the long one was never tokenized


def test_a_very_large_prompt_is_tokenized_while_another_stream_goes_on(tmp_path: Path) -> None:
    folder = huge_context_model(tmp_path)
    window: list[float] = []
    real = PromptWorker.prepare

    async def timed(self: PromptWorker, prompts, param):
        window.append(time.perf_counter())
        try:
            return await real(self, prompts, param)
        finally:
            window.append(time.perf_counter())

    async def body(service: InferenceService) -> tuple[list[float], str]:
        # Start the worker process first, so that its start-up (slow on a busy machine) does
        # not outlast the stream below.
        warm = TextPrompt("river " * (THRESHOLD_CHARS // 6 + 1))  # tokenized there, refused
        with pytest.raises(ContextLengthExceeded):
            await service.submit(GenerationRequest(warm, max_tokens=999_000))
        PromptWorker.prepare = timed  # type: ignore[method-assign]
        arrivals: list[float] = []
        stream = await service.submit(
            GenerationRequest(
                TextPrompt("river"), SamplingParams(min_new_tokens=1900), max_tokens=1900
            )
        )

        async def read() -> None:
            async for piece in stream:
                if piece.token is not None:
                    arrivals.append(time.perf_counter())

        reader = asyncio.create_task(read())
        deadline = time.monotonic() + 60
        while not arrivals:
            assert time.monotonic() < deadline, "the stream made no token"
            await asyncio.sleep(0.001)
        # Some 400k tokens: within the KV budget's length, but not with 999k more.
        big = ChatPrompt([{"role": "user", "content": "river mountain " * 200_000}])
        with pytest.raises(ContextLengthExceeded) as exc:
            await service.submit(GenerationRequest(big, max_tokens=999_000))
        stream.cancel()
        await reader
        return arrivals, exc.value.message

    try:
        arrivals, message = run(
            ServiceConfig(
                ModelConfig(folder, device="cpu", intra_op_threads=1), Limits(max_concurrency=2)
            ),
            body,
        )
    finally:
        PromptWorker.prepare = real  # type: ignore[method-assign]
    start, end = window
    during = [t for t in arrivals if start < t < end]
    assert during, "the stream produced nothing while the big prompt was tokenized"
    assert "999000 new tokens" in message  # it was tokenized: the count is in the message
