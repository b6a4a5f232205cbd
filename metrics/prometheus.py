"""Prometheus metrics (prometheus-client) and the one structured log line per request.

Each app gets its own registry, so several apps (tests, workers) never share counters.
Latency histograms are observed on the event loop as tokens reach the HTTP side, the same
place the per-request TTFT/TPOT metrics are measured.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from backends.handle import FinishedChoice

log = logging.getLogger("genai.requests")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1)


class ServerMetrics:
    def __init__(
        self,
        running: Callable[[], float] = lambda: 0,
        waiting: Callable[[], float] = lambda: 0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        Gauge("genai_requests_running", "Sequences being generated", registry=r).set_function(
            running
        )
        Gauge(
            "genai_requests_waiting", "Requests admitted, waiting for a slot", registry=r
        ).set_function(waiting)
        self.finished = Counter(
            "genai_requests_finished",
            "Finished generations by finish reason",
            ["reason"],
            registry=r,
        )
        self.rejected = Counter(
            "genai_requests_rejected",
            "Requests refused because the server was full",
            registry=r,
        )
        self.cancelled = Counter(
            "genai_requests_cancelled",
            "Generations cancelled (client gone, admin, shutdown)",
            registry=r,
        )
        self.ttft = Histogram(
            "genai_time_to_first_token_seconds",
            "Accepted to first token",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tpot = Histogram(
            "genai_time_per_output_token_seconds",
            "Mean time per output token after the first, per request",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "genai_inter_token_latency_seconds",
            "Gap between two tokens",
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "genai_e2e_request_latency_seconds",
            "Accepted to finished",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue = Histogram(
            "genai_queue_time_seconds",
            "Submitted to start of prefill",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.prompt_tokens = Counter("genai_prompt_tokens", "Prompt tokens", registry=r)
        self.generated_tokens = Counter("genai_generation_tokens", "Generated tokens", registry=r)
        self.cached_tokens = Counter(
            "genai_cached_prompt_tokens",
            "Prompt tokens served from a reused KV cache",
            registry=r,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # ---- backends.service.Observer -------------------------------------------------------
    def on_rejected(self) -> None:
        self.rejected.inc()

    def on_token(self, gap: float | None) -> None:
        if gap is not None:
            self.itl.observe(gap)

    def on_finished(self, choice: FinishedChoice) -> None:
        finish, m = choice.finish, choice.metrics
        self.finished.labels(finish.reason).inc()
        if finish.reason in ("cancelled", "timeout"):
            self.cancelled.inc()
        if m.output_tokens:
            self.ttft.observe(m.ttft)
        if m.output_tokens > 1:
            self.tpot.observe(m.tpot)
        self.e2e.observe(m.total_latency)
        self.queue.observe(finish.queue_time)
        self.prompt_tokens.inc(finish.usage.prompt_tokens)
        self.generated_tokens.inc(finish.usage.completion_tokens)
        self.cached_tokens.inc(finish.usage.cached_tokens)
        log.info(
            json.dumps(
                {
                    "event": "request_finished",
                    "request_id": choice.id,
                    "finish_reason": finish.reason,
                    "prompt_tokens": finish.usage.prompt_tokens,
                    "cached_tokens": finish.usage.cached_tokens,
                    "completion_tokens": finish.usage.completion_tokens,
                    "queue_time": round(finish.queue_time, 6),
                    "ttft": round(m.ttft, 6),
                    "tpot": round(m.tpot, 6),
                    "total_latency": round(m.total_latency, 6),
                    **({"error": finish.error} if finish.error else {}),
                }
            )
        )
