"""Prometheus metrics (prometheus-client) and the one structured log line per request.

Each app gets its own registry, so several apps (tests, workers) never share counters.
Latency histograms are observed on the event loop as tokens reach the HTTP side, the same
place the per-request TTFT/TPOT metrics are measured.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from backends.core.handle import FinishedChoice
from backends.core.service import ServiceStats
from backends.speech.request import TranscriptionResult
from metrics.engine_time import EngineTimeCollector
from metrics.model_server import ModelServerCollector

log = logging.getLogger("genai.requests")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
LOAD_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1)


class ServerMetrics:
    """Every metric carries a ``model`` label: one set per served model (adapters count
    under their base model)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r, model = self.registry, ["model"]
        self.running = Gauge(
            "genai_requests_running", "Sequences being generated", model, registry=r
        )
        self.waiting = Gauge(
            "genai_requests_waiting", "Requests admitted, waiting for a slot", model, registry=r
        )
        self.finished = Counter(
            "genai_requests_finished",
            "Finished generations by finish reason",
            ["model", "reason"],
            registry=r,
        )
        self.rejected = Counter(
            "genai_requests_rejected",
            "Requests refused because the server was full",
            model,
            registry=r,
        )
        self.grammar_failures = Counter(
            "genai_grammar_failures",
            "Grammars (JSON schemas, regexes, tool calls) that failed: refused before "
            "generating (refused), failed while generating (generation), or held a tool call "
            "the output ended inside (cut)",
            ["model", "stage"],
            registry=r,
        )
        self.cancelled = Counter(
            "genai_requests_cancelled",
            "Generations cancelled (client gone, admin, shutdown)",
            model,
            registry=r,
        )
        self.ttft = Histogram(
            "genai_time_to_first_token_seconds",
            "Accepted to first token",
            model,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tpot = Histogram(
            "genai_time_per_output_token_seconds",
            "Mean time per output token after the first, per request",
            model,
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "genai_inter_token_latency_seconds",
            "Gap between two tokens",
            model,
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "genai_e2e_request_latency_seconds",
            "Accepted to finished",
            model,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue = Histogram(
            "genai_queue_time_seconds",
            "Submitted to start of prefill",
            model,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.prompt_tokens = Counter("genai_prompt_tokens", "Prompt tokens", model, registry=r)
        self.generated_tokens = Counter(
            "genai_generation_tokens", "Generated tokens", model, registry=r
        )
        self.cached_tokens = Counter(
            "genai_cached_prompt_tokens",
            "Prompt tokens served from a reused KV cache",
            model,
            registry=r,
        )
        self.audio_seconds = Counter(
            "genai_audio_seconds", "Seconds of audio transcribed", model, registry=r
        )
        # n-gram speculation (vLLM's spec_decode_num_draft_tokens, _num_accepted_tokens and
        # _num_drafts): mean accepted length = 1 + accepted / verify runs.
        self.draft_tokens = Counter(
            "genai_speculative_draft_tokens",
            "Tokens n-gram speculation drafted and the model verified",
            model,
            registry=r,
        )
        self.accepted_tokens = Counter(
            "genai_speculative_accepted_tokens",
            "Drafted tokens taken (each saved a decode step)",
            model,
            registry=r,
        )
        self.verify_runs = Counter(
            "genai_speculative_verify_runs",
            "Runs that verified a draft",
            model,
            registry=r,
        )
        self.acceptance = Gauge(
            "genai_speculative_acceptance_rate",
            "Accepted ÷ drafted tokens since the model was loaded (0 before any draft)",
            model,
            registry=r,
        )
        self.speculated: dict[str, tuple[int, int]] = {}  # drafted, accepted, per model

        self.image_tokens = Counter(
            "genai_image_prompt_tokens",
            "Prompt tokens that stand for images",
            model,
            registry=r,
        )
        media = [*model, "modality"]
        self.media_requests = Counter(
            "genai_media_requests", "Requests with images or audio", media, registry=r
        )
        self.media_items = Counter(
            "genai_media_items", "Images or audio clips in requests", media, registry=r
        )
        self.media_bytes = Counter(
            "genai_media_bytes", "Bytes of images or audio, as sent or fetched", media, registry=r
        )

        # Residency (backends/core/residency.py): kept across a model's unloads, since they
        # count them; labelled by configured model name (and a reason from a fixed set).
        self.loads = Counter(
            "genai_model_loads", "Times a model was loaded (at start or on use)", model, registry=r
        )
        self.load_seconds = Histogram(
            "genai_model_load_seconds",
            "Time a model took to load",
            model,
            buckets=LOAD_BUCKETS,
            registry=r,
        )
        self.unloads = Counter(
            "genai_model_unloads",
            "Times a model was unloaded: idle (its keep-alive ran out), evicted (another needed "
            "room) or admin",
            [*model, "reason"],
            registry=r,
        )
        self.loaded = Gauge("genai_model_loaded", "1 while a model is in memory", model, registry=r)

        self.reasons: dict[str, set[str]] = {}  # finish reasons counted, per model
        self.prefix_stores = PrefixStoreCollector()
        r.register(self.prefix_stores)
        r.register(EngineTimeCollector(self.prefix_stores.sources))
        # The gateway's names for the pod (metrics/model_server.py), read off the same models.
        r.register(ModelServerCollector(self.prefix_stores.sources))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # ---- backends.core.registry.Attachments ---------------------------------------------------
    def attach(self, service: StatsSource) -> ModelMetrics:
        name = service.model_name
        self.running.labels(name).set_function(lambda: service.stats().running)
        self.waiting.labels(name).set_function(lambda: service.stats().waiting)
        self.prefix_stores.sources[name] = service
        return ModelMetrics(self, name)

    def on_loaded(self, name: str, seconds: float) -> None:
        self.loads.labels(name).inc()
        self.load_seconds.labels(name).observe(seconds)
        self.loaded.labels(name).set(1)

    def on_unloaded(self, name: str, reason: str) -> None:
        self.unloads.labels(name, reason).inc()
        self.loaded.labels(name).set(0)

    def detach(self, name: str) -> None:
        """A model was unloaded: its series go (a later model of that name starts afresh)."""
        self.prefix_stores.sources.pop(name, None)
        self.speculated.pop(name, None)
        for metric in (
            self.running,
            self.waiting,
            self.rejected,
            self.cancelled,
            self.ttft,
            self.tpot,
            self.itl,
            self.e2e,
            self.queue,
            self.prompt_tokens,
            self.generated_tokens,
            self.cached_tokens,
            self.image_tokens,
            self.audio_seconds,
            self.draft_tokens,
            self.accepted_tokens,
            self.verify_runs,
            self.acceptance,
        ):
            with contextlib.suppress(KeyError):
                metric.remove(name)
        for media in (self.media_requests, self.media_items, self.media_bytes):
            for modality in ("image", "audio"):
                with contextlib.suppress(KeyError):
                    media.remove(name, modality)
        for reason in self.reasons.pop(name, set()):
            self.finished.remove(name, reason)
        for stage in ("refused", "generation", "cut"):
            with contextlib.suppress(KeyError):
                self.grammar_failures.remove(name, stage)


class StatsSource(Protocol):
    @property
    def model_name(self) -> str: ...

    @property
    def adapter_names(self) -> tuple[str, ...]: ...

    def stats(self) -> ServiceStats: ...


class PrefixStoreCollector(Collector):
    """The batch engine's host-RAM prefix store, read off each model's stats at scrape time
    (the owner thread counts; a model without a store has no series)."""

    def __init__(self) -> None:
        self.sources: dict[str, StatsSource] = {}

    def collect(self) -> Iterator[Metric]:
        model = ["model"]
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {
            "hits": CounterMetricFamily(
                "genai_prefix_store_hits",
                "Prompts that restored KV blocks from the store",
                labels=model,
            ),
            "misses": CounterMetricFamily(
                "genai_prefix_store_misses",
                "Prompts of a block or more the store had nothing to add to",
                labels=model,
            ),
            "restored_tokens": CounterMetricFamily(
                "genai_prefix_store_restored_tokens",
                "Prompt tokens restored from the store",
                labels=model,
            ),
            "evictions": CounterMetricFamily(
                "genai_prefix_store_evictions",
                "Blocks dropped to stay within the size",
                labels=model,
            ),
            "bytes": GaugeMetricFamily(
                "genai_prefix_store_bytes", "Bytes of KV cache the store holds", labels=model
            ),
            "capacity_bytes": GaugeMetricFamily(
                "genai_prefix_store_capacity_bytes", "The store's size limit", labels=model
            ),
        }
        for name, source in list(self.sources.items()):
            store = source.stats().prefix_store
            if store is not None:
                for field, family in families.items():
                    family.add_metric([name], getattr(store, field))
        yield from families.values()


class ModelMetrics:
    """One model's metrics: the backends.core.service.Observer of its service."""

    def __init__(self, metrics: ServerMetrics, model: str) -> None:
        self.m, self.model = metrics, model

    def on_rejected(self) -> None:
        self.m.rejected.labels(self.model).inc()

    def on_media(self, modality: str, items: int, size: int) -> None:
        self.m.media_requests.labels(self.model, modality).inc()
        self.m.media_items.labels(self.model, modality).inc(items)
        self.m.media_bytes.labels(self.model, modality).inc(size)

    def on_grammar_refused(self) -> None:
        self.m.grammar_failures.labels(self.model, "refused").inc()

    def on_failed_calls(self, count: int) -> None:
        self.m.grammar_failures.labels(self.model, "cut").inc(count)

    def _speculated(self, drafted: int, accepted: int) -> None:
        m, model = self.m, self.model
        m.draft_tokens.labels(model).inc(drafted)
        m.accepted_tokens.labels(model).inc(accepted)
        total_drafted, total_accepted = m.speculated.get(model, (0, 0))
        total_drafted, total_accepted = total_drafted + drafted, total_accepted + accepted
        m.speculated[model] = (total_drafted, total_accepted)
        if total_drafted:
            m.acceptance.labels(model).set(total_accepted / total_drafted)

    def on_token(self, gap: float | None) -> None:
        if gap is not None:
            self.m.itl.labels(self.model).observe(gap)

    def on_transcribed(self, result: TranscriptionResult) -> None:
        """A transcription finished (a speech model's observer hook)."""
        m, model, timing = self.m, self.model, result.timing
        self.on_media("audio", 1, result.bytes)
        m.audio_seconds.labels(model).inc(result.duration)
        m.finished.labels(model, result.finish_reason).inc()
        m.reasons.setdefault(model, set()).add(result.finish_reason)
        if timing.first_text:
            m.ttft.labels(model).observe(timing.first_text)
        m.e2e.labels(model).observe(timing.total)
        m.queue.labels(model).observe(timing.queue_time)
        m.prompt_tokens.labels(model).inc(result.usage.text_tokens + result.usage.audio_tokens)
        m.generated_tokens.labels(model).inc(result.usage.output_tokens)
        log.info(
            json.dumps(
                {
                    "event": "transcription_finished",
                    "request_id": result.id,
                    "model": model,
                    "finish_reason": result.finish_reason,
                    "audio_format": result.format,
                    "audio_bytes": result.bytes,
                    "audio_seconds": round(result.duration, 3),
                    "output_tokens": result.usage.output_tokens,
                    "queue_time": round(timing.queue_time, 6),
                    "ttft": round(timing.first_text, 6),
                    "total_latency": round(timing.total, 6),
                    "real_time_factor": round(timing.real_time_factor, 6),
                }
            )
        )

    def on_encoded(self, inputs: int, tokens: int, seconds: float) -> None:
        """An embeddings or rerank request: its tokens and latency, as a generation's."""
        self.m.finished.labels(self.model, "stop").inc()
        self.m.reasons.setdefault(self.model, set()).add("stop")
        self.m.e2e.labels(self.model).observe(seconds)
        self.m.prompt_tokens.labels(self.model).inc(tokens)

    def on_finished(self, choice: FinishedChoice) -> None:
        finish, m, metrics, model = choice.finish, choice.metrics, self.m, self.model
        metrics.finished.labels(model, finish.reason).inc()
        metrics.reasons.setdefault(model, set()).add(finish.reason)
        if finish.reason in ("cancelled", "timeout"):
            metrics.cancelled.labels(model).inc()
        if finish.reason == "grammar_error":
            metrics.grammar_failures.labels(model, "generation").inc()
        if m.output_tokens:
            metrics.ttft.labels(model).observe(m.ttft)
        if m.output_tokens > 1:
            metrics.tpot.labels(model).observe(m.tpot)
        metrics.e2e.labels(model).observe(m.total_latency)
        metrics.queue.labels(model).observe(finish.queue_time)
        metrics.prompt_tokens.labels(model).inc(finish.usage.prompt_tokens)
        metrics.generated_tokens.labels(model).inc(finish.usage.completion_tokens)
        metrics.cached_tokens.labels(model).inc(finish.usage.cached_tokens)
        if finish.usage.image_tokens:
            metrics.image_tokens.labels(model).inc(finish.usage.image_tokens)
        if finish.usage.verify_runs:
            self._speculated(finish.usage.drafted_tokens, finish.usage.accepted_tokens)
            metrics.verify_runs.labels(model).inc(finish.usage.verify_runs)
        log.info(
            json.dumps(
                {
                    "event": "request_finished",
                    "request_id": choice.id,
                    "model": model,
                    "finish_reason": finish.reason,
                    "prompt_tokens": finish.usage.prompt_tokens,
                    "cached_tokens": finish.usage.cached_tokens,
                    "completion_tokens": finish.usage.completion_tokens,
                    **(
                        {
                            "drafted_tokens": finish.usage.drafted_tokens,
                            "accepted_tokens": finish.usage.accepted_tokens,
                        }
                        if finish.usage.verify_runs
                        else {}
                    ),
                    "queue_time": round(finish.queue_time, 6),
                    "ttft": round(m.ttft, 6),
                    "tpot": round(m.tpot, 6),
                    "total_latency": round(m.total_latency, 6),
                    **({"error": finish.error} if finish.error else {}),
                }
            )
        )
