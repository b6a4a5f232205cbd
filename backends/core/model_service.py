"""What every served model's core shares, whatever its kind: its name(s), readiness, the
drain flag, the observer, admission's refusals (503 draining or not ready, 429 with
``Retry-After`` at capacity) and the answer to a request its kind does not serve.

:class:`~backends.core.service.InferenceService` (generators) and
:class:`~backends.core.encoder_service.EncoderService` (embedders, rerankers) and
:class:`~backends.core.speech_service.TranscriptionService` (Whisper) build on it; the registry
holds them all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol

from backends.config import ServiceConfig
from backends.errors import InvalidRequest, ModelNotFound, NotReady, Overloaded, ShuttingDown
from backends.types import EngineTime, KVUsage, PrefixStoreStats

if TYPE_CHECKING:
    from backends.core.handle import FinishedChoice, RequestHandle
    from backends.core.request import GenerationRequest
    from backends.engine.profiling import ProfileWindow
    from backends.speech.request import TranscriptionResult
    from backends.types import PreparedPrompt, Prompt

Status = Literal["loading", "ok", "error"]
ModelKind = Literal["generator", "embedding", "reranker", "transcription"]

# What each kind is for, in the 400 a request of the wrong kind gets.
SERVES: dict[str, str] = {
    "generator": "text generation (chat, completions, responses, messages)",
    "embedding": "embeddings (/v1/embeddings)",
    "reranker": "reranking and scoring (/v1/rerank, /v1/score)",
    "transcription": "speech to text (/v1/audio/transcriptions)",
}


class WrongKind(InvalidRequest):
    code = "wrong_model_kind"


class Observer(Protocol):
    """Hooks for metrics; called on the event loop."""

    def on_rejected(self) -> None: ...

    def on_grammar_refused(self) -> None:
        """A request's grammar was refused before it ran (a 400)."""

    def on_failed_calls(self, count: int) -> None:
        """A choice ended inside ``count`` tool calls a grammar held (failed calls, each
        reported to the client as such)."""

    def on_token(self, gap: float | None) -> None:
        """A token reached the event loop, ``gap`` seconds after the request's previous one."""

    def on_finished(self, choice: FinishedChoice) -> None: ...

    def on_encoded(self, inputs: int, tokens: int, seconds: float) -> None:
        """An encoder request ended well: ``inputs`` encoded, ``tokens`` in all."""

    def on_media(self, modality: str, items: int, size: int) -> None:
        """A request with ``items`` images (or audio clips) of ``size`` bytes in all was
        admitted."""

    def on_transcribed(self, result: TranscriptionResult) -> None:
        """A transcription finished (a speech model's hook)."""


@dataclass(frozen=True)
class RequestStats:
    id: str
    state: Literal["running", "waiting"]
    prompt_tokens: int
    generated_tokens: int
    age_seconds: float
    model: str = ""
    adapter: str | None = None  # the LoRA adapter it runs with, if any
    owner: str | None = None  # whose it is (backends/core/owner.py)


@dataclass(frozen=True)
class ServiceStats:
    running: int
    waiting: int
    requests: tuple[RequestStats, ...]
    prefix_store: PrefixStoreStats | None = None  # the batch engine's, where it has one
    kv: KVUsage | None = None  # a generator's KV cache (None: another kind, or loading)
    engine: EngineTime | None = None  # a generator's owner thread (None: another kind)


class ModelService(ABC):
    kind: ModelKind = "generator"

    def __init__(self, config: ServiceConfig, observer: Observer | None = None) -> None:
        self.config = config
        self.observer = observer
        self.draining = False

    # ---- who it is -----------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.config.model.name

    @property
    def adapter_names(self) -> tuple[str, ...]:
        """LoRA adapters requests may name instead of the model (each applied to it)."""
        return tuple(self.config.model.adapters)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.model_name, *self.adapter_names)

    @property
    def model_dir(self) -> Path:
        return self.config.model.path

    # ---- what each kind tells -------------------------------------------------------------
    @property
    @abstractmethod
    def status(self) -> Status: ...

    @property
    @abstractmethod
    def device(self) -> str: ...

    @property
    @abstractmethod
    def max_length(self) -> int | None:
        """Tokens one input may hold; None while loading."""

    @property
    @abstractmethod
    def strategy_name(self) -> str | None: ...

    @abstractmethod
    def stats(self) -> ServiceStats: ...

    @property
    def modalities(self) -> tuple[str, ...] | None:
        """What the model reads (text, image, audio); None while loading."""
        return ("text",) if self.status == "ok" else None

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    @abstractmethod
    async def drain(self, timeout: float) -> int: ...

    @abstractmethod
    def cancel(self, request_id: str) -> bool: ...

    # ---- generation: a generator's; any other kind refuses --------------------------------
    async def submit(self, request: GenerationRequest) -> RequestHandle:
        self._wrong_kind("generator")

    async def tokenize(self, prompt: Prompt, model: str | None = None) -> PreparedPrompt:
        self._wrong_kind("generator")

    async def detokenize(self, token_ids: Sequence[int], model: str | None = None) -> str:
        self._wrong_kind("generator")

    async def render(self, request: GenerationRequest) -> list[PreparedPrompt]:
        self._wrong_kind("generator")

    async def start_profiling(self, window: ProfileWindow) -> None:
        raise NotImplementedError(f"The {self.kind} model {self.model_name!r} has no profiling.")

    async def stop_profiling(self) -> int:
        raise NotImplementedError(f"The {self.kind} model {self.model_name!r} has no profiling.")

    @property
    def profiling_steps_left(self) -> int:
        return 0

    # ---- shared checks ---------------------------------------------------------------------
    def _wrong_kind(self, wanted: str, **_: Any) -> NoReturn:
        raise WrongKind(
            f"The model {self.model_name!r} is {'an' if self.kind[0] in 'e' else 'a'} "
            f"{self.kind} model: it serves {SERVES[self.kind]}, not {SERVES[wanted]}.",
            param="model",
        )

    def _check_model(self, name: str | None) -> None:
        if name is not None and name not in self.names:
            served = ", ".join(repr(n) for n in self.names)
            raise ModelNotFound(
                f"The model {name!r} does not exist; this server serves {served}.",
                param="model",
            )

    def _ready(self) -> None:
        if self.status != "ok":
            raise NotReady(f"The model is not ready (status: {self.status}).")

    def _refuse_if_closed(self) -> None:
        """503 while draining or not loaded."""
        if self.draining:
            raise ShuttingDown("The server is shutting down; retry on another instance.")
        self._ready()

    def _overloaded(self, busy: int, limit: int, what: str) -> Overloaded:
        if self.observer is not None:
            self.observer.on_rejected()
        return Overloaded(
            f"The server is at capacity ({busy} {what} running or waiting; limit {limit}). "
            "Retry later.",
            headers={"Retry-After": "1"},
        )
