"""Per-request timing. Each request owns its timer; the clock is injectable for tests.

Definitions (seconds, from ``time.perf_counter``):
- ttft: request accepted -> first output token received from the model
- total_latency: request accepted -> generation finished
- tpot: (t_last_token - t_first_token) / (output_tokens - 1); 0 with fewer than 2 tokens
- tokens_per_second: decode speed, (output_tokens - 1) / (t_last - t_first) = 1 / tpot
- output_tokens_per_second: end to end, output_tokens / total_latency (includes prefill)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

Clock = Callable[[], float]


@dataclass(frozen=True)
class RequestMetrics:
    ttft: float
    total_latency: float
    tpot: float
    tokens_per_second: float
    output_tokens_per_second: float
    input_tokens: int
    output_tokens: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class RequestTimer:
    def __init__(self, clock: Clock = time.perf_counter, accepted: float | None = None) -> None:
        self._clock = clock
        self.accepted = clock() if accepted is None else accepted
        self.first_token: float | None = None
        self.last_token: float | None = None
        self.output_tokens = 0
        self.last_gap: float | None = None  # seconds since the previous token (ITL)

    def token(self) -> None:
        now = self._clock()
        if self.first_token is None:
            self.first_token = now
        self.last_gap = None if self.last_token is None else now - self.last_token
        self.last_token = now
        self.output_tokens += 1

    def finish(self, input_tokens: int) -> RequestMetrics:
        return compute_metrics(
            accepted=self.accepted,
            first=self.first_token,
            last=self.last_token,
            end=self._clock(),
            input_tokens=input_tokens,
            output_tokens=self.output_tokens,
        )


def compute_metrics(
    *,
    accepted: float,
    first: float | None,
    last: float | None,
    end: float,
    input_tokens: int,
    output_tokens: int,
) -> RequestMetrics:
    total = max(end - accepted, 0.0)
    ttft = (first - accepted) if first is not None else total
    tpot = 0.0
    if output_tokens > 1 and first is not None and last is not None and last > first:
        tpot = (last - first) / (output_tokens - 1)
    return RequestMetrics(
        ttft=ttft,
        total_latency=total,
        tpot=tpot,
        tokens_per_second=(1.0 / tpot) if tpot > 0 else 0.0,
        output_tokens_per_second=(output_tokens / total) if total > 0 else 0.0,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )
