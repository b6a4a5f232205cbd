"""The owner thread: every onnxruntime-genai object is created and driven here.

onnxruntime-genai requires Engine/Request calls from the thread that made the Engine, and a
Generator step holds the GIL; so one dedicated thread owns the model and all sequences. Other
threads talk to it only through a command queue (work in) and per-job sinks (events out).

Strategy ("generator"): one ``og.Generator`` per active sequence, advanced round-robin one
step at a time. A prompt is prefilled in chunks of ``prefill_chunk`` tokens, so a long prompt
arriving while others decode delays them by one chunk, not by its whole prefill.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backends.runtime import LoadedModel, RuntimeConfig, load_model
from backends.types import FinishEvent, FinishReason, GenerationParams, TokenEvent, Usage

log = logging.getLogger("genai.scheduler")

Event = TokenEvent | FinishEvent
Sink = Callable[[Event], None]


@dataclass
class Job:
    """One generation as the owner thread sees it."""

    id: str
    prompt_ids: list[int]
    params: GenerationParams
    sink: Sink
    cancelled: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.cancelled.set()


@dataclass
class _Sequence:
    job: Job
    generator: Any
    stream: Any
    pending: list[int]
    generated: int = 0


class _Stop:
    pass


class Scheduler:
    def __init__(
        self,
        runtime: RuntimeConfig,
        *,
        prefill_chunk: int = 512,
        loader: Callable[[RuntimeConfig], LoadedModel] = load_model,
    ) -> None:
        self._runtime = runtime
        self._loader = loader
        self._prefill_chunk = prefill_chunk
        self._commands: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._active: list[_Sequence] = []
        self._thread = threading.Thread(target=self._run, name="genai-owner", daemon=True)
        self.loaded = threading.Event()  # set once loading ended, well or not
        self.model: LoadedModel | None = None
        self.load_error: BaseException | None = None

    # ---- called from other threads -------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def call(self, fn: Callable[[LoadedModel], Any]) -> Future[Any]:
        """Run ``fn(model)`` on the owner thread between two steps; returns a future."""
        fut: Future[Any] = Future()
        self._commands.put((fn, fut))
        return fut

    def submit(self, job: Job) -> None:
        self._commands.put(job)

    def stop(self, timeout: float | None = 10.0) -> None:
        self._commands.put(_Stop())
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def active_count(self) -> int:
        return len(self._active)

    # ---- the owner thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.model = self._loader(self._runtime)
        except BaseException as exc:  # reported through load_error; the thread ends
            self.load_error = exc
            self.loaded.set()
            self._drain_after_failure(exc)
            return
        self.loaded.set()
        while True:
            if not self._take_commands(block=not self._active):
                break
            for seq in list(self._active):
                self._step(seq)
        for seq in list(self._active):
            self._finish(seq, "cancelled")

    def _drain_after_failure(self, exc: BaseException) -> None:
        while True:
            cmd = self._commands.get()
            if isinstance(cmd, _Stop):
                return
            if isinstance(cmd, Job):
                cmd.sink(FinishEvent("error", Usage(len(cmd.prompt_ids), 0), str(exc)))
            else:
                cmd[1].set_exception(exc)

    def _take_commands(self, *, block: bool) -> bool:
        """Handle queued commands; False once asked to stop."""
        try:
            cmd = self._commands.get(block=block)
        except queue.Empty:
            return True
        while True:
            if isinstance(cmd, _Stop):
                return False
            if isinstance(cmd, Job):
                self._admit(cmd)
            else:
                fn, fut = cmd
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn(self.model))
                    except BaseException as exc:
                        fut.set_exception(exc)
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return True

    def _admit(self, job: Job) -> None:
        assert self.model is not None
        if job.cancelled.is_set():
            job.sink(FinishEvent("cancelled", Usage(len(job.prompt_ids), 0)))
            return
        og, m, p = self.model.og, self.model, job.params
        try:
            params = og.GeneratorParams(m.model)
            options: dict[str, Any] = {
                "max_length": min(len(job.prompt_ids) + p.max_new_tokens, m.max_length),
                "do_sample": not p.greedy,
            }
            if not p.greedy:
                options.update(temperature=p.temperature, top_p=p.top_p, top_k=p.top_k)
                if p.seed is not None:
                    options["random_seed"] = p.seed
            params.set_search_options(**options)
            generator = og.Generator(m.model, params)
        except Exception as exc:
            log.exception("job %s: could not create a generator", job.id)
            job.sink(FinishEvent("error", Usage(len(job.prompt_ids), 0), str(exc)))
            return
        seq = _Sequence(job, generator, m.tokenizer.create_stream(), list(job.prompt_ids))
        self._active.append(seq)

    def _step(self, seq: _Sequence) -> None:
        assert self.model is not None
        if seq.job.cancelled.is_set():
            self._finish(seq, "cancelled")
            return
        try:
            if seq.pending:
                chunk = seq.pending[: self._prefill_chunk]
                del seq.pending[: self._prefill_chunk]
                seq.generator.append_tokens(np.asarray(chunk, dtype=np.int32))
                return
            seq.generator.generate_next_token()
            token = int(seq.generator.get_next_tokens()[0])
        except Exception as exc:
            log.exception("job %s: generation step failed", seq.job.id)
            self._finish(seq, "error", str(exc))
            return
        if token in self.model.eos_token_ids:
            self._finish(seq, "stop")
            return
        seq.generated += 1
        seq.job.sink(TokenEvent(token, seq.stream.decode(token)))
        if seq.generated >= seq.job.params.max_new_tokens or seq.generator.is_done():
            self._finish(seq, "length")

    def _finish(self, seq: _Sequence, reason: FinishReason, error: str | None = None) -> None:
        self._active.remove(seq)
        seq.job.sink(FinishEvent(reason, Usage(len(seq.job.prompt_ids), seq.generated), error))
        # Drop the generator here, on the owner thread, freeing its KV cache now.
        seq.generator = None
