"""The core every front door shares: ``submit(GenerationRequest) -> RequestHandle``.

One call admits a request, renders and tokenizes its prompts, checks and plans every choice and
queues them, in one trip to the owner thread; blocking native work never runs on the event
loop. Routes, metrics and the in-process client reach the backend only through the public
methods here and the read-only :class:`ServiceStats` snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from backends.chat.formats import ChatFormat, chat_format
from backends.chat.prompt_worker import THRESHOLD_CHARS, PromptWorker
from backends.chat.prompts import check_modalities, prepare_prompt, templates_of
from backends.config import ModelConfig, ServiceConfig
from backends.core.grammar_check import check_guidance
from backends.core.handle import (
    Choice,
    FinishedChoice,
    RequestHandle,
    let_loop_deliver,
    open_handle,
)
from backends.core.model_service import (
    ModelService,
    Observer,
    RequestStats,
    ServiceStats,
    Status,
)
from backends.core.planning import (
    apply_tools,
    check_beams,
    check_prompt_ids,
    check_prompt_size,
    check_prompt_text,
    output_format,
    own_transcripts,
    plan_jobs,
    with_model_defaults,
)
from backends.core.request import GenerationRequest
from backends.engine.choose import strategy_factory
from backends.engine.kv_events import KVEventSink
from backends.engine.profiling import ProfileWindow
from backends.engine.scheduler import Job, Scheduler, Strategy
from backends.errors import Field, InvalidRequest, NotReady
from backends.models.folder import ModelFolder
from backends.models.loader import LoadedModel, load_model
from backends.models.sampling import SamplingDefaults
from backends.types import ChatPrompt, ImageInput, PrefixStoreStats, PreparedPrompt, Prompt

log = logging.getLogger("genai.service")

__all__ = ["InferenceService", "Observer", "RequestStats", "ServiceStats", "Status"]


class InferenceService(ModelService):
    """One model's core: its owner thread (loading the model there), admission, and every
    request's trip to the owner thread and back. ``loader`` loads the model (tests slow it
    down or make it fail); ``kv_events`` hears what its KV cache holds (batch scheduler)."""

    def __init__(
        self,
        config: ServiceConfig,
        observer: Observer | None = None,
        *,
        loader: Callable[[ModelConfig], LoadedModel] = load_model,
        kv_events: KVEventSink | None = None,
    ) -> None:
        super().__init__(config, observer)
        self._loader = loader
        self._chat_format = ChatFormat()  # set on the owner thread, with the model
        self._store_stats = PrefixStoreStats()  # counted on the owner thread (batch only)
        self._scheduler = Scheduler(
            config.model,
            strategy_factory(
                config.model,
                config.limits.max_concurrency,
                self._store_stats,
                kv_events,
                workers=config.limits.workers,
            ),
            max_concurrency=config.limits.max_concurrency,
            loader=self._load,
        )
        self._inflight: dict[str, tuple[Choice, RequestHandle]] = {}
        self._prompt_worker: PromptWorker | None = None
        self._ids = itertools.count(1)

    def _load(self, config: ModelConfig) -> LoadedModel:
        """On the owner thread: the model, and how it writes tool calls and thinking."""
        model = self._loader(config)
        found = chat_format(model.folder, config.tool_parser, config.reasoning_parser)
        model.kept_tokens.update(found.kept_tokens)
        self._chat_format = found
        log.info(
            "tool calls: %s; reasoning: %s",
            found.tools.name if found.tools else "none",
            f"{found.reasoning.start}...{found.reasoning.end}" if found.reasoning else "none",
        )
        return model

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Start loading on the owner thread and wait for it; raises what loading raised."""
        loop = asyncio.get_running_loop()
        self._scheduler.after_first_tokens = lambda: let_loop_deliver(loop)
        self._scheduler.start()
        await loop.run_in_executor(None, self._scheduler.loaded.wait)
        if self._scheduler.load_error is not None:
            raise self._scheduler.load_error

    async def stop(self) -> None:
        if self._prompt_worker is not None:
            self._prompt_worker.close()
        await asyncio.get_running_loop().run_in_executor(None, self._scheduler.stop)

    async def drain(self, timeout: float) -> int:
        """Stop admitting; wait up to ``timeout`` s for in-flight requests; cancel the rest.

        Returns how many sequences had to be cancelled."""
        self.draining = True
        deadline = time.monotonic() + timeout
        while self._inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        left = [choice for choice, _ in self._inflight.values()]
        for choice in left:
            choice.cancel("shutdown")
        while self._inflight and time.monotonic() < deadline + 5:
            await asyncio.sleep(0.02)
        return len(left)

    # ---- read-only state -----------------------------------------------------------------
    @property
    def status(self) -> Status:
        if not self._scheduler.loaded.is_set():
            return "loading"
        return "error" if self._scheduler.load_error is not None else "ok"

    @property
    def device(self) -> str:
        model = self._scheduler.model
        return model.provider.name if model is not None else self.config.model.device

    @property
    def modalities(self) -> tuple[str, ...] | None:
        """What the model reads (text, image, audio); None while loading."""
        model = self._scheduler.model
        return model.modalities if model is not None else None

    @property
    def max_length(self) -> int | None:
        """Tokens one sequence may hold (prompt + output); None while loading."""
        strategy = self._scheduler.strategy
        return strategy.max_length if strategy is not None else None

    @property
    def folder(self) -> ModelFolder | None:
        """The loaded model's folder (what it says of itself); None while loading."""
        model = self._scheduler.model
        return model.folder if model is not None else None

    @property
    def sampling_defaults(self) -> SamplingDefaults | None:
        """What fills the sampling a request leaves out: the model's own defaults; None under
        GENAI_SAMPLING_DEFAULTS=api (each door's own) or while loading."""
        model = self._scheduler.model
        if model is None or self.config.limits.sampling_defaults != "model":
            return None
        return model.folder.sampling_defaults

    @property
    def chat_format(self) -> ChatFormat:
        """How the model writes tool calls and thinking (none of either while loading)."""
        return self._chat_format

    @property
    def strategy_name(self) -> str | None:
        strategy = self._scheduler.strategy
        return strategy.name if strategy is not None else None

    def stats(self) -> ServiceStats:
        """One snapshot, read on the event loop: a choice's state, token count and end all
        change there, in the order the owner thread sent them (its start before its first
        token), so a choice with a token is always running."""
        now = time.perf_counter()
        adapters = self.adapter_names
        requests = tuple(
            RequestStats(
                id=choice.id,
                state="running" if choice.running else "waiting",
                prompt_tokens=len(handle.prompts[choice.prompt_index]) if handle.prompts else 0,
                generated_tokens=choice.generated,
                age_seconds=now - handle.accepted,
                adapter=handle.model if handle.model in adapters else None,
                owner=handle.owner,
            )
            for choice, handle in list(self._inflight.values())
        )
        running = sum(r.state == "running" for r in requests)
        store = self._store_stats
        return ServiceStats(
            running=running,
            waiting=len(requests) - running,
            requests=requests,
            prefix_store=dataclasses.replace(store) if store.capacity_bytes else None,
            kv=self._scheduler.kv_usage if self.status == "ok" else None,
            engine=self._scheduler.engine_time if self.status == "ok" else None,
        )

    # ---- requests ------------------------------------------------------------------------
    async def submit(self, request: GenerationRequest) -> RequestHandle:
        """Admit, prepare and queue every choice of ``request``; iterate the handle for them."""
        self._check_model(request.model)
        if not request.prompts or request.n < 1:
            raise InvalidRequest("The request has no prompt to generate from.", param="prompt")
        check_prompt_text(request)
        request = own_transcripts(request, self.names)
        self._admit(request.choice_count)
        model, strategy = self._loaded()
        check_prompt_ids(request, model.vocab_size)
        self.check_media(request)
        defaults = self.sampling_defaults
        if defaults is not None:
            request = with_model_defaults(request, defaults)
        request = apply_tools(request, self._chat_format)
        check_beams(request)
        chars = check_prompt_size(
            request, strategy.max_length, model.folder.max_token_chars, model.max_length
        )
        if request.sampling.guidance is not None:
            try:
                await asyncio.to_thread(lambda: check_guidance(request, model.guidance_tokenizer))
            except InvalidRequest:
                if self.observer is not None:
                    self.observer.on_grammar_refused()
                raise
        tokenized = None
        images = any(isinstance(p, ChatPrompt) and p.images for p in request.prompts)
        if chars > THRESHOLD_CHARS and not images:  # tokenizing holds the GIL: elsewhere
            tokenized = await self._worker(model).prepare(request.prompts, Field("prompt"))
        if tokenized is not None or request.sampling.guidance is not None:
            self._admit(request.choice_count)  # the wait may have let others in
        handle = self._new_handle(request, output_format(request, self._chat_format))
        prepared = self._scheduler.submit(
            lambda model, strategy: self._prepare(model, strategy, request, handle, tokenized)
        )
        try:
            # Shielded: once the owner thread has the request, it either queues every choice
            # (they then end through the scheduler, cancelled if need be) or none.
            await asyncio.shield(asyncio.wrap_future(prepared))
        except asyncio.CancelledError:
            handle.cancel()
            loop = asyncio.get_running_loop()

            def settle(fut: Future[None]) -> None:
                if fut.exception() is not None:  # nothing was queued: nothing will finish
                    with contextlib.suppress(RuntimeError):  # the loop is gone already
                        loop.call_soon_threadsafe(self._forget, handle)

            prepared.add_done_callback(settle)
            raise
        except BaseException:
            self._forget(handle)
            raise
        if images and self.observer is not None:
            loaded = [i for p in request.prompts if isinstance(p, ChatPrompt) for i in p.images]
            size = sum(i.source_bytes for i in loaded if isinstance(i, ImageInput))
            self.observer.on_media("image", len(loaded), size)
        return handle

    def check_media(self, request: GenerationRequest) -> None:
        """A 400 naming the model and the modality if the request has an image (or audio) this
        model cannot read; doors call it before they fetch or decode anything."""
        self._check_model(request.model)
        model, _ = self._loaded()
        for prompt in request.prompts:
            check_modalities(request.model or self.model_name, model.modalities, prompt)

    def cancel(self, request_id: str) -> bool:
        """Cancel the sequence ``request_id`` (as listed by :meth:`stats`)."""
        entry = self._inflight.get(request_id)
        if entry is None:
            return False
        entry[0].cancel("admin")
        return True

    async def tokenize(self, prompt: Prompt, model: str | None = None) -> PreparedPrompt:
        """A prompt as the model would get it: rendered (a chat) and tokenized."""
        [prepared] = await self.render(GenerationRequest(prompt, model=model))
        return prepared

    async def render(self, request: GenerationRequest) -> list[PreparedPrompt]:
        """``request``'s prompts as :meth:`submit` feeds them to the model (its tools applied,
        rendered, tokenized), without generating."""
        self._check_model(request.model)
        request = own_transcripts(request, self.names)
        loaded, strategy = self._loaded()
        check_prompt_ids(request, loaded.vocab_size)
        self.check_media(request)
        check_prompt_text(request)
        request = apply_tools(request, self._chat_format)
        check_prompt_size(
            request, strategy.max_length, loaded.folder.max_token_chars, loaded.max_length
        )
        param = Field("prompt")
        prompts = request.prompts
        future = self._scheduler.call(lambda m: [prepare_prompt(m, p, param) for p in prompts])
        result: list[PreparedPrompt] = await asyncio.wrap_future(future)
        return result

    async def detokenize(self, token_ids: Sequence[int], model: str | None = None) -> str:
        self._check_model(model)
        loaded, _ = self._loaded()
        vocab = loaded.vocab_size
        bad = sorted({t for t in token_ids if not 0 <= t < vocab})
        if bad:
            raise InvalidRequest(
                f"Token ids outside the vocabulary (0..{vocab - 1}): {bad[:10]}", param="tokens"
            )
        future = self._scheduler.call(lambda m: m.decode(token_ids))
        text: str = await asyncio.wrap_future(future)
        return text

    async def start_profiling(self, window: ProfileWindow) -> None:
        """onnxruntime profiling of the next ``window.steps`` model steps, files capped.

        Raises NotImplementedError if the scheduler cannot profile."""
        self._ready()
        await asyncio.wrap_future(
            self._scheduler.call(lambda _: self._scheduler.start_profile(window))
        )

    async def stop_profiling(self) -> int:
        """End a profiling window now; how many profile files are kept."""
        self._ready()
        kept: int = await asyncio.wrap_future(
            self._scheduler.call(lambda _: self._scheduler.end_profile())
        )
        return kept

    @property
    def profiling_steps_left(self) -> int:
        window = self._scheduler.profile
        return window.steps if window is not None else 0

    # ---- internals -----------------------------------------------------------------------
    def _loaded(self) -> tuple[LoadedModel, Strategy]:
        model, strategy = self._scheduler.model, self._scheduler.strategy
        if self.status != "ok" or model is None or strategy is None:
            raise NotReady(f"The model is not ready (status: {self.status}).")
        return model, strategy

    def _worker(self, model: LoadedModel) -> PromptWorker:
        if self._prompt_worker is None:
            folder = model.folder
            self._prompt_worker = PromptWorker(
                folder.path, templates_of(folder), folder.special_tokens
            )
        return self._prompt_worker

    def _admit(self, sequences: int) -> None:
        """Refuse new work when draining or when running + waiting would pass the limit."""
        self._refuse_if_closed()
        limits = self.config.limits
        limit = limits.max_concurrency + limits.max_queue
        if sequences > limit:  # not even an idle server could take it: no point retrying
            raise InvalidRequest(
                f"The request asks for {sequences} sequences (prompts x n); this server runs "
                f"{limits.max_concurrency} at once and queues {limits.max_queue} more, so it "
                f"can take at most {limit} in one request.",
                param="n",
            )
        if len(self._inflight) + sequences > limit:
            raise self._overloaded(len(self._inflight), limit, "sequences")

    def _new_handle(self, request: GenerationRequest, output: ChatFormat | None) -> RequestHandle:
        base = request.request_id or f"gen-{next(self._ids)}"
        if any(key == base or key.startswith(base + ".") for key in self._inflight):
            base = f"{base}-{next(self._ids)}"
        model = request.model or self.model_name
        handle = open_handle(
            request, base, model, self._token, self._finished, output, self._failed_calls
        )
        for choice in handle.choices:
            self._inflight[choice.id] = (choice, handle)
        return handle

    def _prepare(
        self,
        model: LoadedModel,
        strategy: Strategy,
        request: GenerationRequest,
        handle: RequestHandle,
        tokenized: list[PreparedPrompt] | None,
    ) -> tuple[None, list[Job]]:
        """On the owner thread: render and tokenize (unless the prompt worker did), then
        everything else that can refuse the request, then its jobs."""
        param = Field("prompt")
        prompts = tokenized or [prepare_prompt(model, p, param) for p in request.prompts]
        adapter = request.model if request.model in self.adapter_names else None
        jobs = plan_jobs(request, handle, prompts, model, strategy, self.config.limits, adapter)
        return None, jobs

    def _forget(self, handle: RequestHandle) -> None:
        for choice in handle.choices:
            self._inflight.pop(choice.id, None)

    def _token(self, gap: float | None) -> None:
        if self.observer is not None:
            self.observer.on_token(gap)

    def _failed_calls(self, count: int) -> None:
        if self.observer is not None:
            self.observer.on_failed_calls(count)

    def _finished(self, choice: Choice, finished: FinishedChoice) -> None:
        self._inflight.pop(choice.id, None)
        if self.observer is not None:
            self.observer.on_finished(finished)
