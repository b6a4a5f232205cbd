"""Strategy "engine": ``og.Engine`` schedules and batches the sequences itself.

With ``engine.dynamic_batching`` in genai_config.json (paged-attention models: CUDA fp16/bf16,
WebGPU) this is continuous batching with automatic prefix caching (reported as
``cached_prompt_tokens``). Otherwise the Engine batches statically: a request arriving
mid-batch waits until the whole batch finishes, and per-turn seeds and stop strings are not
available. Logit-level features (OpenAI penalties, logit_bias, logprobs) have no Engine API and
are refused up front (:meth:`unsupported`), never silently ignored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from backends.engine.scheduler import WINDOW_BEAMS, Job, Refusal
from backends.models.loader import LoadedModel
from backends.types import FinishReason, GeneratedToken, GenerationParams, KVUsage

log = logging.getLogger("genai.engine")

MAX_RETRYABLE = 64  # guidance a model cannot satisfy can retry forever (ENGINE-NOTES)


@dataclass
class _Turn:
    job: Job
    request: Any
    turn_id: int
    stream: Any
    dropped: FinishReason | None = None
    retries: int = 0


class EngineStrategy:
    name = "engine"

    def __init__(
        self,
        model: LoadedModel,
        *,
        cache_size: int = 0,
        event_buffer: int = 256,
        slots: int = 1,
    ):
        og = model.og
        self.model = model
        self.max_length = model.max_length
        self.slots = slots  # sequences the scheduler runs at once: the KV capacity reported
        self.og = og
        self.engine = og.Engine(model.model)
        self.buffer = self.engine.create_event_buffer(event_buffer)
        self.dynamic = model.dynamic_batching
        self._turns: dict[int, _Turn] = {}  # id(og.Request) -> turn
        self._flags = og.EngineEventFlags
        self._reasons: dict[Any, FinishReason] = {
            og.FinishReason.EOS: "stop",
            og.FinishReason.STOP_STRING: "stop",
            og.FinishReason.MAX_GENERATED_TOKENS: "length",
            og.FinishReason.MAX_SESSION_TOKENS: "length",
            og.FinishReason.CANCELLED: "cancelled",
            og.FinishReason.FAILED: "error",
        }

    def unsupported(self, p: GenerationParams, prompt_tokens: int = 0) -> str | Refusal | None:
        if p.adapter is not None:
            return "adapter"  # the Engine has no adapter API (0.18)
        if p.num_beams > 1:  # and no other scheduler runs it on a sliding-window model
            return WINDOW_BEAMS if self.model.folder.sliding_window else "num_beams"
        if p.presence_penalty:
            return "presence_penalty"
        if p.frequency_penalty:
            return "frequency_penalty"
        if p.logit_bias:
            return "logit_bias"
        if p.logprobs or p.top_logprobs:
            return "logprobs"
        if p.seed is not None and not self.dynamic:
            return "seed"  # per-turn seeds need an Engine with dynamic batching
        if p.min_p and not p.greedy:
            return "min_p"  # no logits API, and no min-p option in the Engine's turns
        if p.speculative is not None and p.speculative.asks:
            return Refusal(
                "speculative",
                "n-gram speculation is not available on the 'engine' scheduler serving this "
                "model (onnxruntime-genai's Engine has none; the batch and generator "
                "schedulers have it).",
            )
        return None

    # ---- Strategy ------------------------------------------------------------------------
    def active_jobs(self) -> list[Job]:
        return [t.job for t in self._turns.values()]

    def kv_usage(self) -> KVUsage:
        """The running turns' tokens (prompt and generated so far), of ``slots`` full-length
        sequences: the Engine does not tell how full its own (paged) cache is."""
        held = sum(len(t.job.prompt_ids) + t.job.generated for t in self._turns.values())
        return KVUsage(held, self.slots * self.max_length)

    def add(self, job: Job) -> None:
        p = job.params
        request = self.engine.create_request(options=self.og.RequestOptions())
        opts = self.og.TurnOptions(request)
        opts.set_max_generated_tokens(p.max_new_tokens)
        if p.min_new_tokens:
            opts.set_min_generated_tokens(p.min_new_tokens)
        opts.set_do_sample(not p.greedy)
        if not p.greedy:
            opts.set_temperature(p.temperature)
            opts.set_top_p(p.top_p)
            if p.top_k:
                opts.set_top_k(p.top_k)
        if p.repetition_penalty != 1.0:
            opts.set_repetition_penalty(p.repetition_penalty)
        if p.seed is not None:
            opts.set_seed(p.seed)
        if p.guidance is not None:
            opts.set_guidance(*p.guidance)
        turn_id = request.begin_turn(np.asarray(job.prompt_ids, dtype=np.int32), opts)
        self._turns[id(request)] = _Turn(
            job, request, turn_id, self.model.tokenizer.create_stream()
        )

    def step(self) -> None:
        try:
            events = self.engine.run(self.buffer)
        except Exception as exc:
            log.exception("engine step failed")
            for turn in list(self._turns.values()):
                self._close(turn, "error", str(exc))
            return
        for event in events:  # events are views into the buffer: read them now
            current = self._turns.get(id(event.request))
            if current is not None:
                self._handle(current, event)

    def drop(self, job: Job, reason: FinishReason) -> None:
        for turn in self._turns.values():
            if turn.job is job and turn.dropped is None:
                turn.dropped = reason
                job.finish(reason)  # the caller hears now; the slot frees when the engine says
                turn.request.cancel_turn(turn.turn_id)

    def set_profiling(self, prefix: str | None) -> None:
        raise NotImplementedError("onnxruntime-genai 0.18's Engine has no profiling option")

    def close(self) -> None:
        for turn in list(self._turns.values()):
            self._close(turn, "cancelled")

    # ---- internals -----------------------------------------------------------------------
    def _handle(self, turn: _Turn, event: Any) -> None:
        flags = int(event.flags)
        if flags & int(self._flags.FAILED):
            self._close(turn, "error", f"engine error {event.error_code}")
            return
        if flags & int(self._flags.RETRYABLE):
            turn.retries += 1
            if turn.retries > MAX_RETRYABLE and turn.dropped is None:
                turn.dropped = "grammar_error"
                turn.request.cancel_turn(turn.turn_id)
        if flags & int(self._flags.TOKEN) and turn.dropped is None:
            token = int(event.token)
            if token not in self.model.eos_token_ids:
                if turn.job.emit(GeneratedToken(token, self.model.token_text(turn.stream, token))):
                    self.drop(turn.job, "stop")  # a stop string: end the turn here
        if flags & int(self._flags.TURN_FINISHED):
            reason = turn.dropped or self._reasons.get(event.finish_reason, "stop")
            usage = event.usage
            if usage is not None:
                turn.job.cached_tokens = int(usage.cached_prompt_tokens)
            grammar = turn.dropped == "grammar_error"
            error = "the grammar could not be satisfied" if grammar else None
            self._close(turn, reason, error)

    def _close(self, turn: _Turn, reason: FinishReason, error: str | None = None) -> None:
        self._turns.pop(id(turn.request), None)
        turn.job.finish(reason, error)
        try:
            turn.request.close()  # frees its KV cache and batch slot
        except Exception:
            log.exception("closing request of job %s", turn.job.id)
