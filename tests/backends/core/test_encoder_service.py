"""The encoder core on the real tiny models: micro-batching gives the oracle's vectors,
admission refuses with 429 at capacity, a cancelled or timed-out request leaves no trace, and
draining refuses new work."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.encoder_service import EmbedRequest, EncoderService
from backends.engine.encoder.tokenize import Encoded
from backends.errors import Overloaded, RequestTimedOut, ShuttingDown, StartupError
from config.settings import DEMO_MODEL_DIR, REPO_ROOT

pytestmark = pytest.mark.model

FOLDER = REPO_ROOT / "tests" / "hub_models" / "st-embedder"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())


def service(limits: Limits | None = None, **model: Any) -> EncoderService:
    config = ModelConfig(FOLDER, name="embedder", intra_op_threads=1, **model)
    return EncoderService(ServiceConfig(config, limits or Limits()))


def slow_runs(svc: EncoderService, seconds: float, gate: threading.Event | None = None) -> None:
    runner = svc._worker.runner
    assert runner is not None
    run = runner.run

    def slow(rows: Sequence[Encoded]) -> Any:
        if gate is not None:
            gate.wait(10)
        time.sleep(seconds)
        return run(rows)

    runner.run = slow  # type: ignore[method-assign]


def test_concurrent_requests_share_batches_and_match_the_oracle() -> None:
    async def main() -> tuple[list[Any], int]:
        svc = service(batch_wait_ms=200)
        await svc.start()
        try:
            gate = threading.Event()
            slow_runs(svc, 0, gate)
            texts = EXPECTED["sentences"]
            tasks = [asyncio.create_task(svc.embed(EmbedRequest([t]))) for t in texts]
            await asyncio.sleep(0.3)
            gate.set()
            results = await asyncio.gather(*tasks)
            return [r.vectors[0] for r in results], svc._worker.batches_run
        finally:
            await svc.stop()

    got, batches_run = asyncio.run(main())
    assert batches_run < len(got)  # several requests ran in one batch
    for vector, want in zip(got, EXPECTED["embeddings"], strict=True):
        assert np.abs(vector - np.array(want)).max() <= 1e-4


def test_at_capacity_a_request_is_refused_with_retry_after() -> None:
    async def main() -> None:
        svc = service(Limits(max_concurrency=1, max_queue=0))
        await svc.start()
        try:
            slow_runs(svc, 0.3)
            first = asyncio.create_task(svc.embed(EmbedRequest(["one"])))
            await asyncio.sleep(0.05)
            with pytest.raises(Overloaded) as refused:
                await svc.embed(EmbedRequest(["two"]))
            assert refused.value.headers["Retry-After"] == "1"
            assert len((await first).vectors) == 1
            assert len((await svc.embed(EmbedRequest(["three"]))).vectors) == 1
        finally:
            await svc.stop()

    asyncio.run(main())


def test_a_cancelled_request_is_not_run_and_leaves_no_trace() -> None:
    async def main() -> None:
        svc = service()
        await svc.start()
        try:
            gate = threading.Event()
            slow_runs(svc, 0, gate)
            blocker = asyncio.create_task(svc.embed(EmbedRequest(["first"])))
            await asyncio.sleep(0.05)
            victim = asyncio.create_task(svc.embed(EmbedRequest(["x"] * 5)))
            await asyncio.sleep(0.05)
            victim.cancel()
            with pytest.raises(asyncio.CancelledError):
                await victim
            gate.set()
            await blocker
            assert svc._worker.rows_run == 1  # the cancelled inputs never ran
            assert svc.stats().requests == ()
        finally:
            await svc.stop()

    asyncio.run(main())


def test_timeout_and_draining() -> None:
    async def main() -> None:
        svc = service(Limits(request_timeout=0.1))
        await svc.start()
        try:
            slow_runs(svc, 0.5)
            with pytest.raises(RequestTimedOut):
                await svc.embed(EmbedRequest(["slow"]))
            assert svc.stats().requests == ()
            assert await svc.drain(1.0) == 0
            with pytest.raises(ShuttingDown):
                await svc.embed(EmbedRequest(["late"]))
        finally:
            await svc.stop()

    asyncio.run(main())


def test_a_folder_that_is_no_encoder_fails_to_load() -> None:
    async def main() -> None:
        svc = EncoderService(ServiceConfig(ModelConfig(DEMO_MODEL_DIR, kind="embedding")))
        with pytest.raises(StartupError):
            await svc.start()
        assert svc.status == "error"
        await svc.stop()

    asyncio.run(main())
