"""Strategy "batch": continuous batching on the CPU over a plain onnxruntime session.

Every step runs at most one prefill chunk (of the oldest newcomer, into its own KV row) and
one decode run for every sequence that has a token to feed, all rows together: a ragged
batch, since the attention op reads each row's length from its mask row. A request that
arrives mid-generation starts prefilling at the next step and joins the decode batch as soon
as its prompt is in; a long prompt is fed in chunks, so it never freezes the others.
``InferenceSession.run`` releases the GIL, so the event loop streams while the model runs.

A step has a token budget (``step_tokens``, vLLM's ``max_num_batched_tokens``): beside ``n``
decoding rows, a prefill chunk feeds at most ``step_tokens - n`` prompt tokens (a prompt is
cut into as few such chunks as hold it, of even size), so every decoding sequence gets a
token each step while a long prompt is read. Such a step runs its chunk on a worker thread
while its decode run goes on in this one (they write different positions), so it takes
about the longer of the two, not their sum. With no row decoding, nobody waits: chunks of up
to ``prefill_chunk`` tokens.

Or a newcomer's prefill overlaps decoding (``overlap``): its chunk of up to ``prefill_chunk``
tokens runs on the worker thread across as many steps as it takes, while the decode runs go
on, step after step, in this thread; it joins the decode batch at the first step after its
last chunk lands. No chunk is cut smaller than ``prefill_chunk`` and no step waits for one, so
the decoding rows keep their pace and no run is added. Both runs then use a second session
with half the intra-op threads, so each has its own cores (on 2 cores, one thread each: a
128-token prefill and 8-row decode steps each ran as fast beside the other as alone, where
two runs of the 2-thread session slowed each other down). While a chunk is in flight its row
is left where it is: no row moves, and other rows copy from it only what it held before.
With ``overlap="auto"`` (the default) each newcomer's prompt is read that way only where the
costs seen so far say it pays (:mod:`backends.engine.batch.prefill_policy`); a short one, or
one on a machine where it does not pay, is read in the step, whole or in chunks that stall
the decoding rows no more than a decode step and a half.

The decode batch is the contiguous range of rows up to the highest one decoding, so the busy
rows are kept at the bottom: a sequence in a row above a row that is not busy (a finished
sequence's, or a prefix match's high up) swaps places with it, copying only the positions in
use. Rows in the range with nothing to decode (a newcomer still prefilling) ride along as
dummies whose one new position is written just past what their row holds, where it harms
nothing.

A newcomer's longest shared prefix is copied from whichever row holds it, or restored from the
host-RAM prefix store (:mod:`backends.engine.batch.sharing`); it looks again just before its
first prefill chunk, when the rows ahead of it may hold more.

With ``GENAI_SPECULATIVE_TOKENS`` set, a decoding row whose own prompt and output suggest its
next tokens, and for which that pays, feeds them with its next token in a batch-1 run of its
own after the batched decode run, and keeps those the sampler confirms
(:mod:`backends.engine.batch.speculation`). Whether that pays follows from what batched steps
and verify runs cost, as this strategy times them when nothing else shares the threads
(:mod:`backends.engine.batch.speculation_policy`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from backends.engine import last_logits
from backends.engine.batch.block_ledger import BlockLedger
from backends.engine.batch.chunks import ChunkReader, InFlight
from backends.engine.batch.decoder import Decoder
from backends.engine.batch.guidance import Constraint, Grammars
from backends.engine.batch.kv_cache import KVCache
from backends.engine.batch.prefill_policy import PrefillPolicy, Read
from backends.engine.batch.prefix_store import PrefixStore
from backends.engine.batch.sampler import Choice, RowState, choose
from backends.engine.batch.sequence import MIN_CHUNK, Seq, chunk_budget, take
from backends.engine.batch.sharing import SHARE_MIN, PrefixSharing
from backends.engine.batch.slots import SlotTable
from backends.engine.batch.speculation import Speculation, accept
from backends.engine.scheduler import Job, Refusal
from backends.models.loader import LoadedModel
from backends.types import (
    FinishReason,
    GenerationParams,
    KVUsage,
)

log = logging.getLogger("genai.batch")


class BatchStrategy:
    name = "batch"

    def __init__(
        self,
        model: LoadedModel,
        decoder: Decoder,
        kv: KVCache,
        *,
        prefill_chunk: int = 256,
        step_tokens: int = 0,
        overlap: bool | str = False,
        cache_size: int = 4,
        make_session: Any = None,
        store: PrefixStore | None = None,
        share_min: int = SHARE_MIN,
        overlap_decoder: Decoder | None = None,
        ledger: BlockLedger | None = None,
        speculation: Speculation | None = None,
    ) -> None:
        self.model = model
        self.decoder = decoder
        self.kv = kv
        self.max_length = min(kv.capacity, model.max_length)
        self.prefill_chunk = prefill_chunk
        self.step_tokens = step_tokens  # 0: no budget, every chunk is prefill_chunk tokens
        self.overlap = bool(overlap)  # a newcomer's prefill runs beside decode steps
        # "auto": only where it pays, by what the runs cost (prefill_policy.py)
        self.policy = PrefillPolicy(min_chunk=MIN_CHUNK) if overlap == "auto" else None
        self.chunks: ChunkReader[Seq] = ChunkReader(kv, decoder, overlap_decoder, self.policy)
        self.slots = SlotTable(kv.slots, keep=cache_size)
        self.sharing = PrefixSharing(kv, self.slots, store, share_min)
        self.grammars = Grammars(
            model.folder.path / "tokenizer.json", decoder.spec.vocab_size, model.eos_token_ids
        )
        self.speculation = speculation or Speculation(0)
        self._active: list[Seq] = []
        self._make_session = make_session
        self._plain_session = decoder.session
        self.ledger = ledger  # told what the rows hold after each step, for the KV events

    # ---- Strategy ------------------------------------------------------------------------
    def unsupported(self, params: GenerationParams, prompt_tokens: int = 0) -> str | Refusal | None:
        if params.adapter is not None:
            return "adapter"  # onnxruntime applies one adapter per run, not per row
        if params.num_beams > 1:
            return "num_beams"
        return last_logits.refusal(self.model.folder, params)

    def active_jobs(self) -> list[Job]:
        return [s.job for s in self._active]

    @property
    def _inflight(self) -> InFlight[Seq] | None:
        return self.chunks.inflight

    def kv_usage(self) -> KVUsage:
        """Tokens the running sequences' rows hold, of every row's capacity. Resident rows
        (finished sequences kept for reuse) are not counted: a newcomer takes them when it
        needs a row, as vLLM counts its cached, unreferenced blocks as free."""
        held = sum(len(s.tokens) for s in self._active)
        return KVUsage(held, self.kv.slots * self.kv.capacity)

    def add(self, job: Job) -> None:
        p = job.params
        guide: Constraint | None = None
        if p.guidance is not None:
            guide = self.grammars.matcher(*p.guidance)
        elif p.call_grammar is not None:
            guide = self.grammars.lazy(p.call_grammar)
        row, held = self.slots.acquire(job.prompt_ids)
        prompt = job.prompt_ids
        exact = min(held, self.slots.exact(row))  # all of the prompt, if what it holds is
        seq = Seq(
            job,
            row,
            tokens=list(prompt[:held]),
            pending=list(prompt[held:]),
            state=RowState.create(p, prompt, guide),
            stream=self.model.tokenizer.create_stream(),
            exact=len(prompt) if exact == held else exact,
        )
        job.cached_tokens = held
        self._share(seq, first=True)
        self._active.append(seq)

    def step(self) -> None:
        if not log.isEnabledFor(logging.DEBUG):
            self._step()
            return
        started, before = time.perf_counter(), self._census()
        self._step()
        log.debug(
            "step %.1f ms: %d decoding, %d waiting, read in flight %s; now %d, %d, %s; %s",
            (time.perf_counter() - started) * 1e3,
            *before,
            *self._census(),
            self.policy or "no prefill policy",
        )

    def _census(self) -> tuple[int, int, bool]:
        """Rows decoding, newcomers with prompt left to read, and whether a read is in
        flight: what the debug log gives for each step."""
        decoding = sum(1 for s in self._active if s.next_token is not None)
        waiting = sum(1 for s in self._active if s.pending)
        return decoding, waiting, self._inflight is not None

    def _step(self) -> None:
        if self._inflight is None:
            self._compact()
        decoding = [s for s in self._active if s.next_token is not None]
        drafts = self._drafts(decoding)
        drafting = {id(seq) for seq, _ in drafts}
        batched = [s for s in decoding if id(s) not in drafting]
        newcomer = None
        if self._inflight is None:
            newcomer = next((s for s in self._active if s.pending), None)
        decoded = False

        def decode(alone: bool = True) -> None:
            nonlocal decoded
            decoded = True
            # nothing else on the threads: what the runs cost, for the speculation rule
            timed = alone and self._inflight is None
            if batched:
                self._guarded(batched, lambda seqs: self._decode(seqs, timed))
            for seq, draft in drafts:
                self._guarded([seq], lambda seqs, d=draft: self._verify(seqs[0], d, timed))

        if newcomer is not None and self.overlap and decoding:
            read = self._plan(newcomer)
            if read.beside:  # beside the decode steps
                self._guarded([newcomer], lambda seqs, n=read.tokens: self._launch(seqs, n))
            else:  # in this step, as many tokens as the prefill policy lets the rows wait for
                self._guarded([newcomer], lambda seqs, n=read.tokens: self._prefill(seqs, n))
        elif newcomer is not None:
            chunk = chunk_budget(len(decoding), self.prefill_chunk, self.step_tokens)
            beside = (lambda: decode(alone=False)) if decoding and self.step_tokens > 0 else None
            self._guarded([newcomer], lambda seqs: self._prefill(seqs, chunk, beside))
        if decoding and not decoded:
            decode()
        self._land(wait=not decoding)
        self._tell()

    def drop(self, job: Job, reason: FinishReason) -> None:
        for seq in self._active:
            if seq.job is job:
                if self._inflight is not None and self._inflight.seq is seq:
                    past = self._inflight.past
                    if not self._settle():  # its row is written to until the chunk lands
                        del seq.tokens[past:]  # what the chunk wrote is not good
                self._finish(seq, reason)
                self._tell()
                return

    def set_profiling(self, prefix: str | None) -> None:
        """ORT's own session profiling: a profiling session from now on, or back to the
        plain one (the profiling session then writes its file)."""
        self._land(wait=True)  # no run in flight on the session being swapped
        current = self.decoder.session
        if prefix is not None and current is self._plain_session:
            self.decoder.session = self._make_session(prefix)
        elif prefix is None and current is not self._plain_session:
            current.end_profiling()
            self.decoder.session = self._plain_session

    def close(self) -> None:
        self._settle()
        self.set_profiling(None)
        self.chunks.close()
        if self.ledger is not None:
            self.ledger.clear()  # the model is unloaded: its KV goes with it

    def _tell(self) -> None:
        """Tell the ledger the blocks every row holds now (busy rows: what another row may
        copy yet), and send what changed."""
        if self.ledger is not None:
            busy = [(s.row, self._written(s)) for s in self._active]
            self.ledger.rows(busy + self.slots.shareable())
            self.ledger.flush()

    # ---- internals -----------------------------------------------------------------------
    def _guarded(self, seqs: list[Seq], run: Any) -> None:
        try:
            run(seqs)
        except Exception as exc:
            log.exception("batch step failed")
            for seq in seqs:
                if seq in self._active:
                    self._finish(seq, "error", str(exc))

    def _compact(self) -> None:
        """Move sequences above the lowest ``len(active)`` rows down into the idle rows there
        (swapping with what those hold), so that every decode row is a live one; then let the
        newcomers about to be prefilled look for a longer shared prefix."""
        count = len(self._active)
        busy = {s.row for s in self._active}
        holes = [row for row in range(count) if row not in busy]
        high = sorted((s for s in self._active if s.row >= count), key=lambda s: -s.row)
        for hole, seq in zip(holes, high, strict=True):
            held = len(self.slots.resident(hole) or ())
            self.kv.swap(seq.row, hole, len(seq.tokens), held)
            self.slots.exchange(seq.row, hole)
            seq.row = hole
        for seq in self._active:
            if seq.pending and len(seq.tokens) == seq.job.cached_tokens:  # none of its own fed
                self._share(seq, first=False)

    def _share(self, seq: Seq, *, first: bool) -> None:
        """Copy into ``seq``'s row the longest prefix of its prompt another row (busy or
        resident) or the prefix store holds, if longer than what the row holds."""
        rows = [(s.row, self._written(s)) for s in self._active] + self.slots.shareable()
        prompt, held = seq.job.prompt_ids, len(seq.tokens)
        n = self.sharing.extend(seq.row, prompt, held, rows, exact=seq.exact, count=first)
        if n > held:
            seq.tokens, seq.pending = list(prompt[:n]), list(prompt[n:])
            seq.job.cached_tokens, seq.exact = n, len(prompt)

    def _written(self, seq: Seq) -> list[int]:
        """The exact prefix of ``seq``'s row another row may copy now: not the positions a
        chunk in flight is still writing."""
        held = seq.tokens[: seq.exact]
        if self._inflight is not None and self._inflight.seq is seq:
            return held[: self._inflight.past]
        return held

    def _plan(self, newcomer: Seq) -> Read:
        """Where the newcomer's next chunk is read, and at most how many tokens: beside the
        decode steps (``overlap=True``), or where the prefill policy says (``"auto"``)."""
        pending = len(newcomer.pending)
        read = Read(pending, beside=True) if self.policy is None else self.policy.plan(pending)
        return read._replace(tokens=min(read.tokens, self.prefill_chunk))

    def _prefill(self, seqs: list[Seq], budget: int, beside: Any = None) -> None:
        """Feed the next chunk (at most ``budget`` tokens) of a newcomer's prompt into its row;
        ``beside`` (the others' decode run) runs meanwhile on this thread, the chunk on the
        worker thread: onnxruntime releases the GIL, and the two runs touch different
        positions (the newcomer's row rides along in the decode run as a dummy whose one new
        position is written just past this chunk)."""
        [seq] = seqs
        chunk, past = seq.next_chunk(budget)
        if beside is None:
            logits = self.chunks.read(seq.row, chunk, past)
        else:
            fed = self.chunks.submit(seq.row, chunk, past)
            try:
                beside()
            finally:
                logits = fed.result()
        if not seq.pending:
            self._choose([seq], logits[:, -1, :])

    def _launch(self, seqs: list[Seq], budget: int) -> None:
        """Start the next chunk (at most ``budget`` tokens) of a newcomer's prompt on the
        worker thread; :meth:`_land` takes its result at a later step."""
        [seq] = seqs
        chunk, past = seq.next_chunk(budget)
        self.chunks.launch(seq, seq.row, chunk, past)

    def _land(self, *, wait: bool) -> None:
        """Take the chunk in flight if it is done (or, with ``wait``, once it is): its row
        then holds it, and after a prompt's last chunk its first token is chosen."""
        inflight = self.chunks.landed(wait=wait)
        if inflight is None:
            return

        def land(seqs: list[Seq]) -> None:
            logits = inflight.future.result()
            if not inflight.seq.pending:
                self._choose(seqs, logits[:, -1, :])

        self._guarded([inflight.seq], land)

    def _settle(self) -> bool:
        """Wait for the chunk in flight, if any, and drop its result (its sequence ends);
        whether it was fed."""
        return self.chunks.settle()

    def _decode(self, seqs: list[Seq], timed: bool = False) -> None:
        rows = max(s.row for s in seqs) + 1
        lengths = self._row_lengths(rows)
        ids = np.zeros((rows, 1), dtype=np.int64)
        for seq in seqs:
            assert seq.next_token is not None
            ids[seq.row, 0] = seq.next_token
        mask = (np.arange(max(lengths) + 1)[None, :] <= np.asarray(lengths)[:, None]).astype(
            np.int64
        )
        positions = np.asarray(lengths, dtype=np.int64)[:, None]
        decoder = self.chunks.running
        started = time.perf_counter()
        logits = decoder.run(ids, mask, positions, self.kv, (0, rows))
        took = time.perf_counter() - started
        if self.policy is not None:
            self.policy.decoded(took, beside=self._inflight is not None)
        if timed:
            self.speculation.costs.stepped(rows, took)
        for seq in seqs:
            assert seq.next_token is not None
            seq.tokens.append(seq.next_token)
            seq.next_token = None
        self._choose(seqs, logits[[s.row for s in seqs], -1, :])

    def _row_lengths(self, rows: int) -> list[int]:
        """How many positions each of rows ``[0, rows)`` holds (a dummy row writes there)."""
        lengths = [len(self.slots.resident(r) or ()) for r in range(rows)]
        for seq in self._active:
            if seq.row < rows:
                lengths[seq.row] = len(seq.tokens)
        return lengths

    def _choose(self, seqs: Sequence[Seq], logits: Any) -> None:
        eos = self.model.eos_token_ids
        choices = choose(np.asarray(logits, dtype=np.float32), [s.state for s in seqs], eos)
        for seq, choice in zip(seqs, choices, strict=True):
            self._take(seq, choice)

    def _take(self, seq: Seq, choice: Choice) -> bool:
        """Pass a chosen token on, or end the sequence with it; whether it goes on."""
        ending = take(seq, choice, self.model, self._token_text)
        if ending is not None:
            self._finish(seq, *ending)
        return ending is None

    # ---- speculation (backends/engine/batch/speculation.py) ------------------------------
    def _drafts(self, decoding: list[Seq]) -> list[tuple[Seq, list[int]]]:
        """The decoding rows that draft this step, each with its draft: at most as many tokens
        as it may still emit less one (the token after the draft is emitted too), and as fit
        in its row."""

        def room(s: Seq) -> int:
            return min(
                s.job.params.max_new_tokens - s.state.generated - 1,
                self.max_length - len(s.tokens) - 1,
            )

        return self.speculation.drafts(decoding, room)

    def _verify(self, seq: Seq, draft: list[int], timed: bool = False) -> None:
        """Feed the row's next token and its draft in one batch-1 run (the attention op takes
        several new tokens over a past only at batch size 1), then take the choice at each
        position, with the sequence's state as of the tokens taken before it, while it
        equals the draft token fed at the next position. The positions written past the
        last taken token are not counted in the row: its next run overwrites them."""
        assert seq.next_token is not None
        started = time.perf_counter()
        logits = self.chunks.feed(
            seq.row, [seq.next_token, *draft], len(seq.tokens), self.chunks.running
        )
        if timed:
            self.speculation.costs.verified(len(draft), time.perf_counter() - started)
        accepted = accept(seq, draft, logits[0], self._take, self.model.eos_token_ids)
        self.speculation.settle(seq, len(draft), accepted)

    def _token_text(self, token: int) -> str:
        return str(self.model.tokenizer.decode(np.asarray([token], dtype=np.int32)))

    def _finish(self, seq: Seq, reason: FinishReason, error: str | None = None) -> None:
        self._active.remove(seq)
        self.speculation.ended(seq)
        seq.job.finish(reason, error)
        # The row's keys and values are good for every token it was fed, however it ended.
        exact = min(seq.exact, len(seq.tokens))
        self.slots.release(seq.row, seq.tokens if reason != "error" else None, exact)
