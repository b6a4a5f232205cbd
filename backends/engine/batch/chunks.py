"""Reading a prompt's chunks into its KV row: in the step (on this thread, or on a worker
thread beside the step's decode run), or across steps on the worker thread (``overlap``: one
chunk in flight at a time, on a session with half the threads); each read timed for the
prefill policy (:mod:`backends.engine.batch.prefill_policy`)."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from backends.engine.batch.decoder import Decoder
from backends.engine.batch.kv_cache import KVCache
from backends.engine.batch.prefill_policy import PrefillPolicy

Seq = TypeVar("Seq")  # the strategy's sequence


@dataclass
class InFlight(Generic[Seq]):
    """A prefill chunk running on the worker thread while decode steps go on."""

    seq: Seq
    past: int  # positions its row held before the chunk: all another row may copy yet
    future: Future[Any]


class ChunkReader(Generic[Seq]):
    """Feeds prompt chunks into rows of ``kv``, and holds the one chunk in flight."""

    def __init__(
        self,
        kv: KVCache,
        decoder: Decoder,
        overlap_decoder: Decoder | None,
        policy: PrefillPolicy | None,
    ) -> None:
        self.kv = kv
        self.decoder = decoder
        # What runs while a chunk is in flight, the chunk and the decode runs beside it: a
        # session with half the threads, so the two share the cores instead of fighting.
        self.overlap_decoder = overlap_decoder or decoder
        self.policy = policy
        self.inflight: InFlight[Seq] | None = None
        self._worker: ThreadPoolExecutor | None = None  # feeds a prefill chunk beside a decode

    @property
    def running(self) -> Decoder:
        """The session a run takes now: the overlap's while a chunk is in flight."""
        return self.decoder if self.inflight is None else self.overlap_decoder

    def feed(self, row: int, chunk: list[int], past: int, decoder: Decoder | None = None) -> Any:
        total = past + len(chunk)
        return (decoder or self.decoder).run(
            np.asarray([chunk], dtype=np.int64),
            np.ones((1, total), dtype=np.int64),
            np.arange(past, total, dtype=np.int64)[None, :],
            self.kv,
            (row, row + 1),
        )

    def read(self, row: int, chunk: list[int], past: int, decoder: Decoder | None = None) -> Any:
        """Feed a prompt chunk, and tell the prefill policy what it cost (a verify run is
        fed, but is no prompt read)."""
        started = time.perf_counter()
        logits = self.feed(row, chunk, past, decoder)
        if self.policy is not None:  # from the worker thread too: a float the GIL guards
            beside = decoder is not None  # the overlap's session, beside decode steps
            self.policy.prefilled(len(chunk), time.perf_counter() - started, beside=beside)
        return logits

    def submit(
        self, row: int, chunk: list[int], past: int, decoder: Decoder | None = None
    ) -> Future[Any]:
        """:meth:`read` on the worker thread."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="batch-prefill")
        return self._worker.submit(self.read, row, chunk, past, decoder)

    def launch(self, seq: Seq, row: int, chunk: list[int], past: int) -> None:
        """Start ``seq``'s chunk on the worker thread, on the overlap's session."""
        fed = self.submit(row, chunk, past, self.overlap_decoder)
        self.inflight = InFlight(seq, past, fed)

    def landed(self, *, wait: bool) -> InFlight[Seq] | None:
        """The chunk in flight, no longer in flight, if it is done (or, with ``wait``, once
        it is); None if none, or it is still running."""
        inflight = self.inflight
        if inflight is None or not (wait or inflight.future.done()):
            return None
        self.inflight = None
        return inflight

    def settle(self) -> bool:
        """Wait for the chunk in flight, if any, and drop its result; whether it was fed."""
        inflight, self.inflight = self.inflight, None
        return inflight is None or inflight.future.exception() is None

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown()
