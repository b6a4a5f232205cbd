"""The asyncio face of the scheduler: what routes (and the in-process client) call.

Blocking native work never runs on the event loop: prompts are rendered and tokenized on the
owner thread (``Scheduler.call``), tokens come back through an ``asyncio.Queue`` fed with
``call_soon_threadsafe``. Admission control (running + waiting limits) and draining for a
graceful shutdown live here too.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from backends.chat_template import Message, render_chat
from backends.errors import (
    ContextLengthExceeded,
    GenerationFailed,
    InvalidRequest,
    ModelNotFound,
    NotReady,
    Overloaded,
    ShuttingDown,
)
from backends.runtime import LoadedModel, RuntimeConfig
from backends.scheduler import Event, Job, Scheduler, Strategy
from backends.types import FinishEvent, GenerationParams, PreparedPrompt, TokenEvent
from metrics.timing import RequestMetrics, RequestTimer

log = logging.getLogger("genai.service")

Status = Literal["loading", "ok", "error"]
SchedulerName = Literal["auto", "generator", "engine"]


@dataclass(frozen=True)
class ServiceConfig:
    runtime: RuntimeConfig
    model_name: str = "onnx-genai"
    default_max_tokens: int = 256
    prefill_chunk: int = 256
    scheduler: SchedulerName = "auto"
    max_concurrency: int = 8
    max_queue: int = 64
    cache_sequences: int = 4
    request_timeout: float | None = None  # seconds, per request, queue time included


class Observer(Protocol):
    """Hooks for metrics; called on the event loop."""

    def on_rejected(self) -> None: ...

    def on_token(self, gen: Generation) -> None: ...

    def on_finished(self, gen: Generation) -> None: ...


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


def strategy_factory(config: ServiceConfig) -> Callable[[LoadedModel], Strategy]:
    """Pick the scheduling strategy once the model is loaded (``auto`` looks at the model)."""

    def make(model: LoadedModel) -> Strategy:
        name = config.scheduler
        if name == "auto":
            name = "engine" if model.dynamic_batching else "generator"
        if name == "engine":
            from backends.engine_strategy import EngineStrategy

            return EngineStrategy(model, cache_size=config.cache_sequences)
        from backends.generator_strategy import GeneratorStrategy

        return GeneratorStrategy(
            model, prefill_chunk=config.prefill_chunk, cache_size=config.cache_sequences
        )

    return make


class Generation:
    """One running request: iterate for tokens; ``finish`` is set as soon as it ended."""

    def __init__(
        self,
        job_id: str,
        prompt: PreparedPrompt,
        timer: RequestTimer,
        on_done: Callable[[Generation], None] = lambda g: None,
        on_token: Callable[[Generation], None] = lambda g: None,
    ) -> None:
        self.id = job_id
        self.prompt = prompt
        self.timer = timer
        self.finish: FinishEvent | None = None
        self.job: Job | None = None
        self._metrics: RequestMetrics | None = None
        self._on_done = on_done
        self._on_token = on_token
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()

    def deliver(self, event: Event) -> None:
        """Called on the owner thread."""
        try:
            self._loop.call_soon_threadsafe(self._receive, event)
        except RuntimeError:  # loop closed: nobody is listening any more
            pass

    def _receive(self, event: Event) -> None:
        # Timing is taken here, when the event loop gets the event, so it does not depend on
        # how fast (or whether) the HTTP side consumes the stream.
        if isinstance(event, TokenEvent):
            self.timer.token()
            self._on_token(self)
        else:
            self.finish = event
            self._metrics = self.timer.finish(len(self.prompt))
            self._on_done(self)
        self._queue.put_nowait(event)

    def cancel(self) -> None:
        if self.job is not None and self.finish is None:
            self.job.cancel()

    async def __aiter__(self) -> AsyncIterator[TokenEvent]:
        while isinstance(event := await self._queue.get(), TokenEvent):
            yield event

    def metrics(self) -> RequestMetrics:
        """Timing, frozen when the generation finished."""
        if self._metrics is not None:
            return self._metrics
        return self.timer.finish(len(self.prompt))


def _let_loop_deliver(loop: asyncio.AbstractEventLoop, timeout: float = 0.005) -> None:
    """Block the owner thread until the event loop has passed on the tokens just delivered.

    onnxruntime-genai holds the GIL for a whole model step (a 1 ms sleep in another thread
    woke only after the step ended), so a first token delivered right before the next step
    would wait for that step before the event loop could send it: one decode step added to
    TTFT. Waiting here (which releases the GIL) lets the loop run its callbacks and the woken
    stream writers first. Done for first tokens only: on every token the handshake cost decode
    speed; ``timeout`` bounds the wait if the loop is busy."""
    done = threading.Event()
    try:
        # Two hops: the first runs after the delivery callbacks, the second after the tasks
        # they woke (the SSE writers) got their turn.
        loop.call_soon_threadsafe(loop.call_soon, done.set)
    except RuntimeError:  # loop closed
        return
    done.wait(timeout)


class InferenceService:
    def __init__(
        self,
        config: ServiceConfig,
        scheduler: Scheduler | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.config = config
        self.scheduler = scheduler or Scheduler(
            config.runtime, strategy_factory(config), max_concurrency=config.max_concurrency
        )
        self.observer = observer
        self.draining = False
        self.inflight: dict[str, Generation] = {}
        self._ids = itertools.count(1)

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Start loading on the owner thread and wait for it; raises what loading raised."""
        loop = asyncio.get_running_loop()
        self.scheduler.after_first_tokens = lambda: _let_loop_deliver(loop)
        self.scheduler.start()
        await asyncio.get_running_loop().run_in_executor(None, self.scheduler.loaded.wait)
        if self.scheduler.load_error is not None:
            raise self.scheduler.load_error

    async def stop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.scheduler.stop)

    async def drain(self, timeout: float) -> int:
        """Stop admitting; wait up to ``timeout`` s for in-flight requests; cancel the rest.

        Returns how many requests had to be cancelled."""
        self.draining = True
        deadline = time.monotonic() + timeout
        while self.inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        left = list(self.inflight.values())
        for gen in left:
            gen.cancel()
        while self.inflight and time.monotonic() < deadline + 5:
            await asyncio.sleep(0.02)
        return len(left)

    @property
    def status(self) -> Status:
        if not self.scheduler.loaded.is_set():
            return "loading"
        return "error" if self.scheduler.load_error is not None else "ok"

    @property
    def ready(self) -> bool:
        return self.status == "ok" and not self.draining

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

    @property
    def strategy_name(self) -> str | None:
        strategy = self.scheduler.strategy
        return strategy.name if strategy is not None else None

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
        params = GenerationParams(max_new_tokens=max_new, **sampling)
        strategy = self.scheduler.strategy
        missing = strategy.unsupported(params) if strategy is not None else None
        if strategy is not None and missing is not None:
            raise InvalidRequest(
                f"{missing} is not supported by the {strategy.name!r} scheduler serving this "
                "model (GENAI_SCHEDULER=generator supports it).",
                param=missing.split(" ")[0].split("/")[0],
            )
        return params

    @property
    def vocab_size(self) -> int:
        return int(self._ready_model().folder.config["model"]["vocab_size"])

    async def decode_tokens(self, token_ids: Sequence[int]) -> list[str]:
        """Each token's own text (for logprobs), decoded on the owner thread."""

        def decode(model: LoadedModel) -> list[str]:
            return [str(model.tokenizer.decode([t])) for t in token_ids]

        return list(await asyncio.wrap_future(self.scheduler.call(decode)))

    def check_admission(self, extra: int = 1) -> None:
        """Refuse new work when draining or when running + waiting is at its limit."""
        if self.draining:
            raise ShuttingDown("The server is shutting down; retry on another instance.")
        self._ready_model()
        limit = self.config.max_concurrency + self.config.max_queue
        if len(self.inflight) + extra > limit:
            if self.observer is not None:
                self.observer.on_rejected()
            raise Overloaded(
                f"The server is at capacity ({len(self.inflight)} requests running or "
                f"waiting; limit {limit}). Retry later.",
                headers={"Retry-After": "1"},
            )

    def generate(
        self,
        prompt: PreparedPrompt,
        params: GenerationParams,
        timer: RequestTimer,
        request_id: str | None = None,
    ) -> Generation:
        self.check_admission()
        job_id = request_id or f"gen-{next(self._ids)}"
        if job_id in self.inflight:
            job_id = f"{job_id}-{next(self._ids)}"
        gen = Generation(job_id, prompt, timer, self._release, self._token)
        timeout = self.config.request_timeout
        deadline = timer.accepted + timeout if timeout else None
        gen.job = Job(gen.id, prompt.token_ids, params, gen.deliver, deadline=deadline)
        self.inflight[gen.id] = gen
        self.scheduler.submit(gen.job)
        return gen

    def _token(self, gen: Generation) -> None:
        if self.observer is not None:
            self.observer.on_token(gen)

    def _release(self, gen: Generation) -> None:
        self.inflight.pop(gen.id, None)
        if self.observer is not None:
            self.observer.on_finished(gen)

    async def set_profiling(self, prefix: str | None) -> None:
        """ORT profiling for every model step from now on (``None``: off)."""
        self._ready_model()

        def toggle(model: LoadedModel) -> None:
            assert self.scheduler.strategy is not None
            self.scheduler.strategy.set_profiling(prefix)

        await asyncio.wrap_future(self.scheduler.call(toggle))

    def cancel(self, request_id: str) -> bool:
        gen = self.inflight.get(request_id)
        if gen is None:
            return False
        gen.cancel()
        return True

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
