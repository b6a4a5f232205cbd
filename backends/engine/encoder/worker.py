"""The encoder's owner thread: it loads the session, then micro-batches concurrent requests.

Each input is one :class:`Work` with its own future. The thread takes what is queued, waits a
bounded moment for company only while admitted requests are still on their way (being
tokenized), sorts what it holds by length (little padding), and runs batches of at most
``batch_tokens`` padded tokens. A cancelled future is skipped, never run.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from backends.engine.encoder.pooling import Array
from backends.engine.encoder.runner import EncoderRunner
from backends.engine.encoder.tokenize import Encoded

log = logging.getLogger("genai.encoder")


@dataclass(eq=False)
class Work:
    row: Encoded
    future: Future[Array] = field(default_factory=Future)

    @property
    def length(self) -> int:
        return len(self.row.ids)


def batches(works: Sequence[Work], budget: int, max_rows: int) -> list[list[Work]]:
    """``works`` grouped by length, each group's padded size (rows x longest) within
    ``budget`` tokens and ``max_rows`` rows; a single input longer than the budget runs alone."""
    out: list[list[Work]] = []
    current: list[Work] = []
    for work in sorted(works, key=lambda w: w.length):
        rows = len(current) + 1
        if current and (rows * work.length > budget or rows > max_rows):
            out.append(current)
            current = []
        current.append(work)
    if current:
        out.append(current)
    return out


class EncoderWorker:
    def __init__(
        self,
        load: Callable[[], EncoderRunner],
        *,
        batch_tokens: int = 8192,
        max_rows: int = 64,
        wait: float = 0.002,
        name: str = "encoder-owner",
    ) -> None:
        self._load = load
        self.batch_tokens, self.max_rows, self.wait = batch_tokens, max_rows, wait
        self._queue: queue.SimpleQueue[list[Work] | None] = queue.SimpleQueue()  # None: stop
        self._expected = 0  # admitted requests not yet queued (being tokenized)
        self._lock = threading.Lock()
        self.loaded = threading.Event()
        self.load_error: BaseException | None = None
        self.runner: EncoderRunner | None = None
        self.batches_run = 0
        self.rows_run = 0
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    # ---- called from the event loop ------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def expect(self, count: int) -> None:
        """``count`` requests (+) are being prepared, or (-) were queued or gave up."""
        with self._lock:
            self._expected += count

    def submit(self, rows: Sequence[Encoded], expected: bool = False) -> list[Work]:
        """Queue a request's inputs, all at once; ``expected``: it was announced by
        :meth:`expect` and is no longer on its way."""
        works = [Work(row) for row in rows]
        with self._lock:  # seen together by _gather: no wait for what is already here
            if expected:
                self._expected -= 1
            self._queue.put(works)
        return works

    # ---- the owner thread ----------------------------------------------------------------
    def _main(self) -> None:
        try:
            self.runner = self._load()
        except BaseException as exc:  # reported by the service's start()
            self.load_error = exc
            self.loaded.set()
            return
        self.loaded.set()
        while True:
            first = self._queue.get()
            if first is None:
                return
            held = list(first)
            stop = self._gather(held)
            self._run(held)
            if stop:
                return

    def _gather(self, held: list[Work]) -> bool:
        """Take what is queued, waiting up to ``wait`` s while more is on its way."""
        deadline = time.perf_counter() + self.wait
        tokens = sum(w.length for w in held)
        while tokens < self.batch_tokens * 4:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                with self._lock:
                    if not self._queue.empty():
                        continue  # queued just now, with its announcement withdrawn
                    waiting = self._expected > 0
                left = deadline - time.perf_counter()
                if not waiting or left <= 0:
                    return False
                try:
                    item = self._queue.get(timeout=left)
                except queue.Empty:
                    return False
            if item is None:
                return True
            held += item
            tokens += sum(w.length for w in item)
        return False

    def _run(self, works: list[Work]) -> None:
        live = [w for w in works if w.future.set_running_or_notify_cancel()]
        runner = self.runner
        assert runner is not None
        for group in batches(live, self.batch_tokens, self.max_rows):
            try:
                out = runner.run([w.row for w in group])
            except Exception as exc:  # a failed run fails its rows only
                log.exception("encoder batch of %d failed", len(group))
                for work in group:
                    work.future.set_exception(exc)
                continue
            self.batches_run += 1
            self.rows_run += len(group)
            for work, vector in zip(group, out, strict=True):
                work.future.set_result(np.array(vector))
