"""One Whisper model's service: its owner thread, admission, and each transcription's trip to
that thread and back as text deltas and one result.

The model is loaded on the owner thread and every onnxruntime-genai call happens there (the
project's owner-thread rule); transcriptions run one at a time in arrival order. Audio is
checked and cut into 30-second windows on an executor thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from backends.config import ServiceConfig
from backends.core.model_service import ModelService, RequestStats, ServiceStats, Status
from backends.core.owner import current_owner
from backends.errors import (
    GenAIError,
    GenerationFailed,
    ModelNotFound,
    NotReady,
    Overloaded,
    RequestCancelled,
    RequestTimedOut,
    ShuttingDown,
)
from backends.speech.audio import Audio, prepare
from backends.speech.request import (
    Segment,
    SpeechTiming,
    SpeechUsage,
    TranscriptionRequest,
    TranscriptionResult,
)
from backends.speech.whisper import WhisperModel, compression_ratio

log = logging.getLogger("genai.speech")

AUDIO_TOKENS_PER_WINDOW = 1500  # encoder positions the decoder attends to, per 30 s window


class SpeechObserver(Protocol):
    """Metrics hooks; called on the event loop."""

    def on_rejected(self) -> None: ...

    def on_transcribed(self, result: TranscriptionResult) -> None: ...


@dataclass
class _Job:
    request: TranscriptionRequest
    audio: Audio
    handle: TranscriptionHandle
    accepted: float
    cancelled: threading.Event  # the handle's
    owner: str | None = field(default_factory=current_owner)  # whose it is


class TranscriptionHandle:
    """Iterate for text deltas (as they are decoded), or await :meth:`result`. Leaving the
    iteration early cancels the transcription."""

    def __init__(self, request_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.id = request_id
        self._loop = loop
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._result: TranscriptionResult | None = None
        # Its job's cancel flag, not the job: a job holds its handle, and a cycle through the
        # job's audio (the upload and its decoded windows, tens of MB) would keep it until the
        # cyclic garbage collector happens to run.
        self.cancelled = threading.Event()

    # ---- from the owner thread -----------------------------------------------------------
    def _send(self, kind: str, value: Any) -> None:
        self._loop.call_soon_threadsafe(self._events.put_nowait, (kind, value))

    # ---- on the event loop ---------------------------------------------------------------
    def cancel(self) -> None:
        self.cancelled.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        finished = False
        try:
            while True:
                kind, value = await self._events.get()
                if kind == "text":
                    yield value
                elif kind == "done":
                    self._result = value
                    finished = True
                    return
                else:
                    finished = True
                    raise value
        finally:
            if not finished:
                self.cancel()

    async def result(self) -> TranscriptionResult:
        if self._result is None:
            async for _ in self:
                pass
        assert self._result is not None
        return self._result


class TranscriptionService(ModelService):
    """A Whisper model's core: the registry serves it beside the chat models' services."""

    kind = "transcription"

    def __init__(
        self,
        config: ServiceConfig,
        observer: SpeechObserver | None = None,
        *,
        loader: Callable[[Path, int | None], WhisperModel] = WhisperModel,
    ) -> None:
        super().__init__(config)
        self.observer: SpeechObserver | None = observer  # type: ignore[assignment]
        self._loader = loader
        self._model: WhisperModel | None = None
        self._load_error: BaseException | None = None
        self._loaded = threading.Event()
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._inflight: dict[str, _Job] = {}
        self._running: str | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)

    # ---- what the registry asks every service ----------------------------------------------
    @property
    def adapter_names(self) -> tuple[str, ...]:
        return ()

    @property
    def device(self) -> str:
        return "cpu" if self.config.model.device == "auto" else self.config.model.device

    @property
    def max_length(self) -> int | None:
        return self._model.context_length if self._model is not None else None

    @property
    def strategy_name(self) -> str | None:
        return None

    @property
    def modalities(self) -> tuple[str, ...] | None:
        """What the model reads: audio (it writes text)."""
        return ("audio",)

    @property
    def status(self) -> Status:
        if not self._loaded.is_set():
            return "loading"
        return "error" if self._load_error is not None else "ok"

    def stats(self) -> ServiceStats:
        now = time.perf_counter()
        requests = tuple(
            RequestStats(
                id=job.handle.id,
                state="running" if job.handle.id == self._running else "waiting",
                prompt_tokens=0,
                generated_tokens=0,
                age_seconds=now - job.accepted,
                owner=job.owner,
            )
            for job in list(self._inflight.values())
        )
        running = sum(r.state == "running" for r in requests)
        return ServiceStats(running, len(requests) - running, requests)

    def cancel(self, request_id: str) -> bool:
        job = self._inflight.get(request_id)
        if job is None:
            return False
        job.cancelled.set()
        return True

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        self._thread = threading.Thread(
            target=self._owner, name=f"speech-owner-{self.model_name}", daemon=True
        )
        self._thread.start()
        await asyncio.get_running_loop().run_in_executor(None, self._loaded.wait)
        if self._load_error is not None:
            raise self._load_error

    async def stop(self) -> None:
        for job in list(self._inflight.values()):
            job.cancelled.set()
        self._jobs.put(None)
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 30)

    async def drain(self, timeout: float) -> int:
        self.draining = True
        deadline = time.monotonic() + timeout
        while self._inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        left = list(self._inflight.values())
        for job in left:
            job.cancelled.set()
        return len(left)

    # ---- requests --------------------------------------------------------------------------
    async def transcribe(self, request: TranscriptionRequest) -> TranscriptionHandle:
        """Check the audio (off the loop), admit, and queue it for the owner thread."""
        if request.model is not None and request.model != self.model_name:
            raise ModelNotFound(f"The model {request.model!r} does not exist.", param="model")
        if self.draining:
            raise ShuttingDown("The server is shutting down.")
        if self.status != "ok" or self._model is None:
            raise NotReady(f"The model {self.model_name!r} is {self.status}.")
        model = self._model
        language = model.check_language(request.language)
        loop = asyncio.get_running_loop()
        audio = await loop.run_in_executor(
            None, lambda: prepare(request.audio, max_seconds=request.max_seconds)
        )
        model.prompt_ids(request.prompt)  # a too-long prompt is refused before queueing
        limits = self.config.limits
        if len(self._inflight) >= 1 + limits.max_queue:
            if self.observer is not None:
                self.observer.on_rejected()
            raise Overloaded(
                "Too many transcriptions in flight; retry later.", headers={"Retry-After": "1"}
            )
        request_id = request.request_id or f"transcribe-{next(self._ids)}"
        handle = TranscriptionHandle(request_id, loop)
        job = _Job(request, audio, handle, time.perf_counter(), handle.cancelled)
        if language is not None:
            job.request = replace(request, language=language)
        self._inflight[request_id] = job
        self._jobs.put(job)
        return handle

    # ---- the owner thread ----------------------------------------------------------------
    def _owner(self) -> None:
        try:
            self._model = self._loader(self.model_dir, self.config.model.intra_op_threads)
        except BaseException as exc:  # reported by start() and /healthz
            self._load_error = exc
        finally:
            self._loaded.set()
        if self._model is None:
            return
        while (job := self._jobs.get()) is not None:
            self._serve(self._model, job)
            del job  # not held while the thread waits for the next (its audio: tens of MB)

    def _serve(self, model: WhisperModel, job: _Job) -> None:
        self._running = job.handle.id
        try:
            if job.cancelled.is_set():  # its client left while it waited
                raise RequestCancelled("The transcription was cancelled before it started.")
            result = self._run(model, job)
        except GenAIError as exc:
            job.handle._send("error", exc)
        except Exception as exc:  # a model failure: in the error shape, never a crash
            log.exception("transcription %s failed", job.handle.id)
            job.handle._send("error", GenerationFailed(f"Transcription failed: {exc}"))
        else:
            if self.observer is not None:  # counted before the answer can go out
                observer = self.observer
                job.handle._loop.call_soon_threadsafe(observer.on_transcribed, result)
            job.handle._send("done", result)
        finally:
            self._running = None
            self._inflight.pop(job.handle.id, None)

    def _run(self, model: WhisperModel, job: _Job) -> TranscriptionResult:
        started = time.perf_counter()
        request, audio, handle = job.request, job.audio, job.handle
        first: list[float] = []
        pieces: list[str] = []  # every delta sent: the result's text is exactly their sum

        def on_text(piece: str) -> None:
            if not first:
                first.append(time.perf_counter())
            pieces.append(piece)
            handle._send("text", piece)

        timeout = self.config.limits.request_timeout
        deadline = job.accepted + timeout if timeout else None

        def stop() -> bool:
            late = deadline is not None and time.perf_counter() > deadline
            return late or job.cancelled.is_set()

        segments: list[Segment] = []
        language = request.language
        text_tokens = output_tokens = 0
        finish = "stop"
        for window in audio.windows:
            no_speech = 0.0
            if language is None:
                detection = model.detect(window.data)
                language, no_speech = detection.language, detection.no_speech_prob
            if segments and segments[-1].text and not segments[-1].text.endswith(" "):
                on_text(" ")  # the windows' texts, one after the other
            out = model.transcribe(
                window.data,
                language,
                request.prompt,
                request.temperature,
                on_text,
                stop,
            )
            text_tokens += out.prompt_tokens
            output_tokens += len(out.tokens) + (out.finish_reason == "stop")
            segments.append(
                Segment(
                    id=len(segments),
                    start=round(window.start, 3),
                    end=round(window.start + window.duration, 3),
                    text=out.text,
                    tokens=out.tokens,
                    avg_logprob=out.avg_logprob,
                    compression_ratio=compression_ratio(out.text),
                    no_speech_prob=no_speech,
                    temperature=request.temperature,
                    seek=int(round(window.start * 100)),
                )
            )
            if out.finish_reason == "cancelled":
                if not job.cancelled.is_set():
                    raise RequestTimedOut(
                        f"The transcription took over GENAI_REQUEST_TIMEOUT ({timeout:g} s)."
                    )
                finish = "cancelled"
                break
            if out.finish_reason == "length":
                finish = "length"
        done = time.perf_counter()
        return TranscriptionResult(
            id=handle.id,
            text="".join(pieces),
            language=language or "",
            duration=audio.duration,
            format=audio.format,
            bytes=len(request.audio),
            segments=tuple(segments),
            usage=SpeechUsage(text_tokens, AUDIO_TOKENS_PER_WINDOW * len(segments), output_tokens),
            timing=SpeechTiming(
                queue_time=started - job.accepted,
                first_text=(first[0] - job.accepted) if first else 0.0,
                total=done - job.accepted,
                audio_seconds=audio.duration,
            ),
            finish_reason=finish,
        )
