"""A request handle without a model, for each door's serving tests (tier ``unit``).

:class:`FakeHandle` has what the serving modules read from a real ``RequestHandle``: iterating
it yields the scripted :class:`ChoiceDelta` s (then raises ``fail``, if given), ``result()``
folds them as the real one does, and ``usage()``, ``metrics()``, ``queue_time()``, ``model``,
``created``, ``choices`` and ``prompt_tokens`` are fixed. :class:`FakeModels` stands in for the
model registry of a whole app (:func:`fake_app`), so a route runs end to end with no model
loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fastapi.testclient import TestClient

from app_onnx_genai import create_app
from backends.chat.formats import ChatFormat
from backends.chat.output import CallDelta, ToolCallResult
from backends.core.handle import ChoiceDelta, ChoiceResult, Result
from backends.core.request import GenerationRequest
from backends.core.timing import RequestMetrics
from backends.types import GeneratedToken, Logprob, SamplingParams, Usage
from config.settings import DEMO_MODEL_DIR, Settings

T = TypeVar("T")

MODEL = "onnx-genai"
METRICS = RequestMetrics(
    ttft=0.1,
    total_latency=0.2,
    tpot=0.01,
    tokens_per_second=100.0,
    output_tokens_per_second=50.0,
    input_tokens=7,
    output_tokens=5,
)


def token(
    text: str, logprob: float | None = None, *alternatives: tuple[str, float]
) -> GeneratedToken:
    """A generated token; with ``logprob``, its log-probability and the top alternatives."""
    chosen = Logprob(1, text, logprob) if logprob is not None else None
    tops = tuple(Logprob(i + 2, t, p) for i, (t, p) in enumerate(alternatives))
    return GeneratedToken(token_id=1, text=text, logprob=chosen, top_logprobs=tops)


def said(text: str, index: int = 0, **more: Any) -> ChoiceDelta:
    """A piece of answer text, made by one token (whose text it is)."""
    return ChoiceDelta(index, text, token(text), (token(text),), **more)


def end(finish: str = "stop", index: int = 0, *, last: bool = True, **more: Any) -> ChoiceDelta:
    """A choice's last piece: no text, ``finish`` as its finish reason."""
    return ChoiceDelta(index, "", finish_reason=finish, last=last, **more)  # type: ignore[arg-type]


@dataclass(frozen=True)
class FakeChoice:
    index: int


@dataclass
class FakeHandle:
    pieces: Sequence[ChoiceDelta]
    model: str = MODEL
    prompt_tokens: int = 7
    token_limits: list[int] = field(default_factory=list)
    usage_: Usage = field(default_factory=lambda: Usage(7, 5, 3))
    metrics_: RequestMetrics = METRICS
    fail: Exception | None = None  # raised after the last piece, as a server-ended choice is
    queued: float = 0.02  # seconds waited for a slot
    n: int = 1
    created: int = 1
    cancelled: bool = False
    sampling: SamplingParams = field(default_factory=SamplingParams)

    @property
    def choices(self) -> list[FakeChoice]:
        return [FakeChoice(i) for i in range(self.n)]

    async def __aiter__(self) -> AsyncIterator[ChoiceDelta]:
        for piece in self.pieces:
            await asyncio.sleep(0)
            yield piece
        if self.fail is not None:
            raise self.fail

    def cancel(self) -> None:
        self.cancelled = True

    def usage(self) -> Usage:
        return self.usage_

    def metrics(self) -> RequestMetrics:
        return self.metrics_

    def queue_time(self) -> float:
        return self.queued

    def transcript(self, index: int = 0) -> None:
        """No tokens behind these pieces: nothing a later turn could continue exactly."""
        return None

    async def result(self) -> Result:
        """The pieces folded per choice, as ``RequestHandle.result`` does."""
        results = {i: ChoiceResult(i) for i in range(self.n)}
        calls: dict[int, dict[int, list[str]]] = {i: {} for i in range(self.n)}
        async for piece in self:
            result = results[piece.index]
            result.text += piece.text
            result.reasoning += piece.reasoning
            result.tokens.extend(piece.tokens)
            result.completion_tokens += int(piece.token is not None)
            for call in piece.calls:
                _fold_call(calls[piece.index], call)
            if piece.finish_reason is not None:
                result.finish_reason = piece.finish_reason
                result.stop_sequence = piece.stop_sequence
                result.failed_calls = list(piece.failed_calls)
        for i, result in results.items():
            result.tool_calls = [ToolCallResult(*parts) for _, parts in sorted(calls[i].items())]
        return Result(list(results.values()), self.usage(), self.metrics())


def _fold_call(calls: dict[int, list[str]], call: CallDelta) -> None:
    if call.id is not None:
        calls[call.index] = [call.id, call.name or "", ""]
    calls[call.index][2] += call.arguments


def run(work: Awaitable[T]) -> T:
    async def wait() -> T:
        return await work

    return asyncio.run(wait())


def collect(items: AsyncIterator[T]) -> list[T]:
    async def gather() -> list[T]:
        return [item async for item in items]

    return asyncio.run(gather())


@dataclass
class FakeService:
    """One model's core, as a door reads it before submitting."""

    chat_format: ChatFormat = field(default_factory=ChatFormat)
    max_length: int | None = 2048


class FakeModels:
    """The model registry, as the routes use it: ``submit`` answers with ``handle`` and keeps
    the core request it was given; ``get`` and ``generator`` give the one :class:`FakeService`."""

    def __init__(self, handle: FakeHandle) -> None:
        self.handle = handle
        self.submitted: list[GenerationRequest] = []
        self.service = FakeService()

    def get(self, name: str | None, kind: str | None = None) -> FakeService:
        return self.service

    def generator(self, name: str | None) -> FakeService:
        return self.service

    async def submit(self, request: GenerationRequest) -> FakeHandle:
        self.submitted.append(request)
        return self.handle

    @asynccontextmanager
    async def hold(self, name: str | None, *_: Any, **__: Any) -> AsyncIterator[FakeService]:
        yield self.service  # always loaded

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def fake_app(handle: FakeHandle, **settings: Any) -> TestClient:
    """The whole app (middleware, error handlers, every door) over ``handle``, no model
    loaded; not entered as a context manager, so no lifespan runs. A bug's 500 is answered,
    not raised in the test (Starlette re-raises it for the server's log)."""
    models: Any = FakeModels(handle)
    app = create_app(Settings.load(model_dir=DEMO_MODEL_DIR, **settings), models)
    return TestClient(app, raise_server_exceptions=False)
