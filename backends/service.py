"""The asyncio face of the scheduler: what routes (and the in-process client) call.

Blocking native work never runs on the event loop: prompts are rendered and tokenized on the
owner thread (``Scheduler.call``), tokens come back through an ``asyncio.Queue`` fed with
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from backends.chat_template import Message, render_chat
from backends.errors import (
    ContextLengthExceeded,
    GenerationFailed,
    InvalidRequest,
    ModelNotFound,
    NotReady,
)
from backends.runtime import LoadedModel, RuntimeConfig
from backends.scheduler import Event, Job, Scheduler
from backends.types import FinishEvent, GenerationParams, PreparedPrompt, TokenEvent
from metrics.timing import RequestMetrics, RequestTimer

log = logging.getLogger("genai.service")

Status = Literal["loading", "ok", "error"]


@dataclass(frozen=True)
class ServiceConfig:
    runtime: RuntimeConfig
    model_name: str = "onnx-genai"
    default_max_tokens: int = 256
    prefill_chunk: int = 512


@dataclass(frozen=True)
class Completion:
    text: str
    finish: FinishEvent
    metrics: RequestMetrics


def plan_max_new_tokens(
    prompt_tokens: int, requested: int | None, default: int, max_length: int
) -> int:
    """How many tokens may be generated. Never truncates the prompt; refuses what cannot fit.

    An explicit ``requested`` that overflows the context is an error (the caller asked for
    something impossible); the server default is reduced to the room left instead.
    """
    room = max_length - prompt_tokens
    if room <= 0:
        raise ContextLengthExceeded(
            f"The prompt has {prompt_tokens} tokens; this model's maximum context length is "
            f"{max_length} tokens, leaving no room to generate. Shorten the messages.",
            param="messages",
        )
    if requested is None:
        return min(default, room)
    if requested > room:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {max_length} tokens. The request has "
            f"{prompt_tokens} prompt tokens and asks for {requested} new tokens "
            f"({prompt_tokens + requested} in total). Reduce max_tokens or the messages.",
            param="max_tokens",
        )
    return requested


class Generation:
    """One running request: iterate for tokens; ``finish`` is set when it ends."""

    def __init__(self, job_id: str, prompt: PreparedPrompt, timer: RequestTimer) -> None:
        self.id = job_id
        self.prompt = prompt
        self.timer = timer
        self.finish: FinishEvent | None = None
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self.job: Job | None = None

    def deliver(self, event: Event) -> None:
        """Called on the owner thread."""
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # loop closed: nobody is listening any more
            pass

    def cancel(self) -> None:
        if self.job is not None and self.finish is None:
            self.job.cancel()

    async def __aiter__(self) -> AsyncIterator[TokenEvent]:
        while self.finish is None:
            event = await self._queue.get()
            if isinstance(event, TokenEvent):
                self.timer.token()
                yield event
            else:
                self.finish = event

    def metrics(self) -> RequestMetrics:
        return self.timer.finish(len(self.prompt))


class InferenceService:
    def __init__(self, config: ServiceConfig, scheduler: Scheduler | None = None) -> None:
        self.config = config
        self.scheduler = scheduler or Scheduler(config.runtime, prefill_chunk=config.prefill_chunk)
        self._ids = itertools.count(1)

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Start loading on the owner thread and wait for it; raises what loading raised."""
        self.scheduler.start()
        await asyncio.get_running_loop().run_in_executor(None, self.scheduler.loaded.wait)
        if self.scheduler.load_error is not None:
            raise self.scheduler.load_error

    async def stop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.scheduler.stop)

    @property
    def status(self) -> Status:
        if not self.scheduler.loaded.is_set():
            return "loading"
        return "error" if self.scheduler.load_error is not None else "ok"

    @property
    def model_dir(self) -> Path:
        return self.config.runtime.model_dir

    @property
    def device(self) -> str:
        model = self.scheduler.model
        return model.provider.name if model is not None else self.config.runtime.device

    @property
    def max_length(self) -> int | None:
        model = self.scheduler.model
        return model.max_length if model is not None else None

    def _ready_model(self) -> LoadedModel:
        if self.status != "ok" or self.scheduler.model is None:
            raise NotReady(f"The model is not ready (status: {self.status}).")
        return self.scheduler.model

    def check_model_name(self, name: str | None) -> None:
        if name is not None and name != self.config.model_name:
            raise ModelNotFound(
                f"The model {name!r} does not exist; "
                f"this server serves {self.config.model_name!r}.",
                param="model",
            )

    # ---- requests ------------------------------------------------------------------------
    async def prepare_chat(self, messages: Sequence[Message]) -> PreparedPrompt:
        has_template = self._ready_model().folder.has_chat_template

        def render(model: LoadedModel) -> PreparedPrompt:
            text = render_chat(model.tokenizer, messages, has_template=has_template)
            return PreparedPrompt(text, [int(t) for t in model.tokenizer.encode(text)])

        return await asyncio.wrap_future(self.scheduler.call(render))

    async def prepare_text(self, text: str) -> PreparedPrompt:
        self._ready_model()

        def encode(model: LoadedModel) -> PreparedPrompt:
            return PreparedPrompt(text, [int(t) for t in model.tokenizer.encode(text)])

        return await asyncio.wrap_future(self.scheduler.call(encode))

    def plan(
        self, prompt: PreparedPrompt, *, max_tokens: int | None, **sampling: Any
    ) -> GenerationParams:
        """Generation parameters for ``prompt``; ``sampling`` are GenerationParams fields."""
        model = self._ready_model()
        max_new = plan_max_new_tokens(
            len(prompt), max_tokens, self.config.default_max_tokens, model.max_length
        )
        bias = sampling.get("logit_bias")
        if bias:
            vocab = self.vocab_size
            bad = [t for t in bias if not 0 <= int(t) < vocab]
            if bad:
                raise InvalidRequest(
                    f"logit_bias names token ids outside the vocabulary (0..{vocab - 1}): {bad}",
                    param="logit_bias",
                )
        return GenerationParams(max_new_tokens=max_new, **sampling)

    @property
    def vocab_size(self) -> int:
        return int(self._ready_model().folder.config["model"]["vocab_size"])

    async def decode_tokens(self, token_ids: Sequence[int]) -> list[str]:
        """Each token's own text (for logprobs), decoded on the owner thread."""

        def decode(model: LoadedModel) -> list[str]:
            return [str(model.tokenizer.decode([t])) for t in token_ids]

        return list(await asyncio.wrap_future(self.scheduler.call(decode)))

    def generate(
        self, prompt: PreparedPrompt, params: GenerationParams, timer: RequestTimer
    ) -> Generation:
        self._ready_model()
        gen = Generation(f"gen-{next(self._ids)}", prompt, timer)
        gen.job = Job(gen.id, prompt.token_ids, params, gen.deliver)
        self.scheduler.submit(gen.job)
        return gen

    async def complete(self, gen: Generation) -> Completion:
        """Run a generation to its end (cancelling it if the caller is cancelled)."""
        pieces: list[str] = []
        try:
            async for event in gen:
                pieces.append(event.text)
        finally:
            gen.cancel()
        assert gen.finish is not None
        if gen.finish.reason == "error":
            raise GenerationFailed(f"Generation failed: {gen.finish.error}")
        return Completion("".join(pieces), gen.finish, gen.metrics())
