"""A strategy with a second one for what it cannot do.

The ``batch`` strategy refuses beam search and LoRA adapters (onnxruntime applies one adapter
per run, not per row); rather than refusing such a request, the scheduler hands it to a
``generator`` strategy made the first time one arrives (it loads the og.Model then: memory for
the weights a second time, only once used). Both run on the owner thread, one step each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from backends.engine.scheduler import Job, Refusal, Strategy
from backends.types import FinishReason, GenerationParams, KVUsage

log = logging.getLogger("genai.scheduler")


class WithFallback:
    def __init__(self, primary: Strategy, make_fallback: Callable[[], Strategy]) -> None:
        self.primary = primary
        self.name = primary.name
        self.max_length = primary.max_length
        self._make_fallback = make_fallback
        self._fallback: Strategy | None = None
        self._profile: str | None = None

    def unsupported(self, params: GenerationParams, prompt_tokens: int = 0) -> str | Refusal | None:
        if self.primary.unsupported(params, prompt_tokens) is None:
            return None
        return self.fallback.unsupported(params, prompt_tokens)

    @property
    def fallback(self) -> Strategy:
        if self._fallback is None:
            log.info("%s scheduler: a request it cannot serve goes to the generator", self.name)
            self._fallback = self._make_fallback()
            if self._profile is not None:
                self._fallback.set_profiling(self._profile)
        return self._fallback

    def add(self, job: Job) -> None:
        if self.primary.unsupported(job.params) is None:
            self.primary.add(job)
        else:
            self.fallback.add(job)

    def step(self) -> None:
        for strategy in self._strategies():
            if strategy.active_jobs():
                strategy.step()

    def drop(self, job: Job, reason: FinishReason) -> None:
        for strategy in self._strategies():
            if job in strategy.active_jobs():
                strategy.drop(job, reason)

    def active_jobs(self) -> list[Job]:
        return [job for strategy in self._strategies() for job in strategy.active_jobs()]

    def kv_usage(self) -> KVUsage:
        """The primary's, plus the fallback's once it runs (its sequences hold their own
        memory)."""
        usage = self.primary.kv_usage()
        if self._fallback is not None:
            usage += self._fallback.kv_usage()
        return usage

    def set_profiling(self, prefix: str | None) -> None:
        self._profile = prefix
        for strategy in self._strategies():
            strategy.set_profiling(prefix)

    def close(self) -> None:
        for strategy in self._strategies():
            strategy.close()

    def _strategies(self) -> list[Strategy]:
        return [self.primary] if self._fallback is None else [self.primary, self._fallback]
