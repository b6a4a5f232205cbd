"""The owner thread: every onnxruntime-genai object is created and driven here.

onnxruntime-genai requires Engine/Request calls from the thread that made the Engine, and a
Generator step holds the GIL; so one dedicated thread owns the model and all sequences. Other
threads talk to it only through a command queue (work in) and per-job sinks (events out).

The scheduler admits at most ``max_concurrency`` jobs into its strategy (the rest wait, the
request running the fewest first), enforces cancellation and deadlines between steps, and lets
the strategy (``batch``, ``generator`` or ``engine``: :mod:`backends.engine.choose`) advance
the active jobs one step at a time.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from backends.config import ModelConfig
from backends.engine.profiling import ProfileWindow
from backends.engine.stops import VisibleText
from backends.errors import GuidanceError, ShuttingDown
from backends.models.loader import LoadedModel, load_model
from backends.types import (
    EngineTime,
    FinishEvent,
    FinishReason,
    GeneratedToken,
    GenerationParams,
    KVUsage,
    SequenceDelta,
    StartEvent,
    Usage,
)

log = logging.getLogger("genai.scheduler")

T = TypeVar("T")
Event = SequenceDelta | FinishEvent | StartEvent
Sink = Callable[[Event], None]


@dataclass
class Job:
    """One sequence as the owner thread sees it."""

    id: str
    prompt_ids: list[int]
    params: GenerationParams
    sink: Sink
    deadline: float | None = None  # time.perf_counter() value after which it times out
    stops: Sequence[str] = ()
    group: str = ""  # the request it belongs to: slots are shared fairly between requests
    cancelled: threading.Event = field(default_factory=threading.Event)
    enqueued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    generated: int = 0
    cached_tokens: int = 0
    # n-gram speculation, as the strategy counted it when the sequence ended
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_runs: int = 0
    done: bool = False
    # Beam search: the jobs of the request's other returned beams. Only this job is
    # scheduled; the strategy hands each follower its beam when the search ends.
    followers: list[Job] = field(default_factory=list)
    # Images: the model processor's inputs (set on the generator before the prompt), how many
    # prompt tokens stand for images, and the images' digests (part of any prefix-reuse key).
    media: Any = None
    image_tokens: int = 0
    image_digests: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._text = VisibleText(self.stops)

    def cancel(self) -> None:
        self.cancelled.set()

    def start(self) -> None:
        """It got a slot: tell its sink (and its beams' followers') before any token."""
        self.started_at = time.perf_counter()
        for job in (self, *self.followers):
            job.started_at = self.started_at
            job.sink(StartEvent())

    def emit(self, event: GeneratedToken) -> bool:
        """Pass a generated token on; True if it completed a stop string (the strategy then
        ends the sequence with ``finish("stop")``)."""
        self.generated += 1
        self.sink(self._text.feed(event))
        return self._text.stopped

    def finish(self, reason: FinishReason, error: str | None = None) -> None:
        if self.done:
            return
        self.done = True
        tail = self._text.flush()
        if tail.text or tail.ready:
            self.sink(tail)
        queued = (self.started_at or time.perf_counter()) - self.enqueued_at
        usage = Usage(
            len(self.prompt_ids),
            self.generated,
            self.cached_tokens,
            self.image_tokens,
            self.drafted_tokens,
            self.accepted_tokens,
            self.verify_runs,
        )
        stop = self._text.stop_sequence
        self.sink(FinishEvent(reason, usage, error, queue_time=queued, stop_sequence=stop))
        for follower in self.followers:  # ended with this one (cancelled, timed out, failed)
            follower.started_at = self.started_at
            follower.finish(reason, error)


# What ``Strategy.unsupported`` names for beam search on a sliding-window model, which no
# scheduler serves (og's beam search fails there), as opposed to "num_beams": not on this one.
WINDOW_BEAMS = "num_beams on a sliding window"


@dataclass(frozen=True)
class Refusal:
    """What ``Strategy.unsupported`` returns for a value it cannot honour that another value
    of the same field may be (a bound, a combination): the field (its core name, with a
    sub-field: ``speculative.num_speculative_tokens``) and why."""

    param: str
    why: str


class Strategy(Protocol):
    """How active jobs are advanced. Called only on the owner thread."""

    name: str
    max_length: int  # tokens one sequence may hold, prompt included

    def unsupported(self, params: GenerationParams, prompt_tokens: int = 0) -> str | Refusal | None:
        """The parameter this strategy cannot honour, if any (the request is then refused);
        ``prompt_tokens``: the prompt's length where it is known (0: not yet)."""
        ...

    def add(self, job: Job) -> None: ...

    def step(self) -> None: ...

    def drop(self, job: Job, reason: FinishReason) -> None: ...

    def active_jobs(self) -> list[Job]: ...

    def kv_usage(self) -> KVUsage:
        """Tokens the running sequences' KV cache holds, of how many it can hold."""
        ...

    def set_profiling(self, prefix: str | None) -> None: ...

    def close(self) -> None: ...


StrategyFactory = Callable[[LoadedModel], Strategy]
Prepare = Callable[[LoadedModel, Strategy], tuple[T, list[Job]]]


@dataclass
class _Admit:
    prepare: Prepare[Any]
    future: Future[Any]


@dataclass
class _Call:
    fn: Callable[[LoadedModel], Any]
    future: Future[Any]


class _Stop:
    pass


class Scheduler:
    def __init__(
        self,
        config: ModelConfig,
        strategy_factory: StrategyFactory,
        *,
        max_concurrency: int = 8,
        loader: Callable[[ModelConfig], LoadedModel] = load_model,
    ) -> None:
        self._config = config
        self._loader = loader
        self._factory = strategy_factory
        self.max_concurrency = max_concurrency
        self._commands: queue.SimpleQueue[_Admit | _Call | _Stop] = queue.SimpleQueue()
        self._waiting: deque[Job] = deque()
        self._thread = threading.Thread(target=self._run, name="genai-owner", daemon=True)
        self.loaded = threading.Event()  # set once loading ended, well or not
        self.model: LoadedModel | None = None
        self.strategy: Strategy | None = None
        self.load_error: BaseException | None = None
        self.profile: ProfileWindow | None = None  # owner thread only
        # The strategy's KV usage after the last step, for /metrics (set on the owner thread).
        self.kv_usage = KVUsage()
        # The owner thread's time in steps, for /metrics (replaced on the owner thread).
        self.engine_time = EngineTime()
        # Called on the owner thread after a step that produced some request's first token.
        self.after_first_tokens: Callable[[], None] | None = None

    # ---- called from other threads -------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def call(self, fn: Callable[[LoadedModel], Any]) -> Future[Any]:
        """Run ``fn(model)`` on the owner thread between two steps; returns a future."""
        fut: Future[Any] = Future()
        self._commands.put(_Call(fn, fut))
        return fut

    def submit(self, prepare: Prepare[T]) -> Future[T]:
        """Run ``prepare(model, strategy)`` on the owner thread; the jobs it returns wait for a
        slot. The future gets its other result, or what it raised (then nothing is queued)."""
        fut: Future[T] = Future()
        self._commands.put(_Admit(prepare, fut))
        return fut

    def stop(self, timeout: float | None = 10.0) -> None:
        self._commands.put(_Stop())
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ---- the owner thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.model = self._loader(self._config)
            self.strategy = self._factory(self.model)
            self.kv_usage = self.strategy.kv_usage()
            log.info("scheduler strategy: %s", self.strategy.name)
        except BaseException as exc:  # reported through load_error; the thread ends
            self.load_error = exc
            self.loaded.set()
            self._drain_after_failure(exc)
            return
        self.loaded.set()
        strategy = self.strategy
        try:
            while self._take_commands(block=not (strategy.active_jobs() or self._waiting)):
                self._expire(strategy)
                self._fill(strategy)
                active = strategy.active_jobs()
                if active:
                    fresh = [j for j in active if j.generated == 0]
                    wall, cpu = time.perf_counter(), time.thread_time()
                    strategy.step()
                    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
                    self.engine_time = self.engine_time.after(wall, cpu)
                    if self.after_first_tokens is not None and any(j.generated for j in fresh):
                        self.after_first_tokens()
                    if self.profile is not None:
                        self._profile_step(strategy, self.profile)
                self.kv_usage = strategy.kv_usage()
        finally:
            for job in list(self._waiting):
                job.finish("cancelled")
            self._waiting.clear()
            for job in list(strategy.active_jobs()):
                strategy.drop(job, "cancelled")
            strategy.close()
            self._refuse_pending(ShuttingDown("The model is being unloaded."))

    def start_profile(self, window: ProfileWindow) -> None:
        """Profile the next ``window.steps`` steps (owner thread)."""
        assert self.strategy is not None
        self.strategy.set_profiling(window.prefix)
        self.profile = window

    def end_profile(self) -> int:
        """Stop profiling now (owner thread); how many files are kept."""
        window, self.profile = self.profile, None
        if window is None:
            return 0
        assert self.strategy is not None
        self.strategy.set_profiling(None)
        return window.prune()

    def _profile_step(self, strategy: Strategy, window: ProfileWindow) -> None:
        window.steps -= 1
        if window.steps <= 0:
            self.end_profile()
        else:
            window.prune()

    def _expire(self, strategy: Strategy) -> None:
        now = time.perf_counter()
        for job in list(self._waiting):
            reason = _expired(job, now)
            if reason is not None:
                self._waiting.remove(job)
                job.finish(reason)
        for job in list(strategy.active_jobs()):
            reason = _expired(job, now)
            if reason is not None:
                strategy.drop(job, reason)

    def _fill(self, strategy: Strategy) -> None:
        """Start waiting jobs while slots are free: each time the job of the request that
        runs the fewest, the earliest among equals, so a request of many choices (``n``,
        many prompts) cannot hold every slot while others wait."""
        while self._waiting and len(strategy.active_jobs()) < self.max_concurrency:
            running = Counter(j.group for j in strategy.active_jobs())
            job = min(self._waiting, key=lambda j: running[j.group])  # stable: earliest wins
            self._waiting.remove(job)
            job.started_at = time.perf_counter()
            try:
                strategy.add(job)
            except Exception as exc:
                log.exception("job %s: could not start", job.id)
                grammar = isinstance(exc, GuidanceError)
                job.finish("grammar_error" if grammar else "error", str(exc))
            else:
                job.start()

    def _drain_after_failure(self, exc: BaseException) -> None:
        while not isinstance(cmd := self._commands.get(), _Stop):
            if cmd.future.set_running_or_notify_cancel():
                cmd.future.set_exception(exc)

    def _refuse_pending(self, exc: BaseException) -> None:
        """Commands that arrived after the stop: nobody will run them."""
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return
            if not isinstance(cmd, _Stop) and cmd.future.set_running_or_notify_cancel():
                cmd.future.set_exception(exc)

    def _handle(self, cmd: _Admit | _Call) -> None:
        if not cmd.future.set_running_or_notify_cancel():
            return
        assert self.model is not None and self.strategy is not None
        try:
            if isinstance(cmd, _Call):
                cmd.future.set_result(cmd.fn(self.model))
                return
            result, jobs = cmd.prepare(self.model, self.strategy)
        except BaseException as exc:
            cmd.future.set_exception(exc)
            return
        self._waiting.extend(jobs)
        cmd.future.set_result(result)

    def _take_commands(self, *, block: bool) -> bool:
        """Handle queued commands; False once asked to stop."""
        try:
            cmd = self._commands.get(block=block)
        except queue.Empty:
            return True
        while True:
            if isinstance(cmd, _Stop):
                return False
            self._handle(cmd)
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return True


def _expired(job: Job, now: float) -> FinishReason | None:
    if job.cancelled.is_set():
        return "cancelled"
    if job.deadline is not None and now >= job.deadline:
        return "timeout"
    return None
