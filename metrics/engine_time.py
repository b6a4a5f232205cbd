"""Each model's owner thread: its time in scheduler steps, read off the model's stats at
scrape time (``backends.types.EngineTime``; a model without an owner thread, such as an
embedding model, has no series).

``rate(genai_engine_busy_seconds_total[1m])`` is the share of time the model's engine
worked, from 0 to 1. ``genai_engine_cpu_seconds_total`` counts the owner thread's own CPU
time: with one intra-op thread (``GENAI_INTRA_OP_THREADS=1``) that thread runs the model, so
CPU seconds per generated token is a measure of the work a token costs that other jobs on the
machine move little (``python -m bench spec`` reports it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from backends.core.model_service import ServiceStats


class Source(Protocol):
    def stats(self) -> ServiceStats: ...


class EngineTimeCollector(Collector):
    """No state of its own: ``sources`` is the metrics' own map of models."""

    def __init__(self, sources: Mapping[str, Source]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        model = ["model"]
        busy = CounterMetricFamily(
            "genai_engine_busy_seconds",
            "Wall-clock time the model's owner thread spent in scheduler steps",
            labels=model,
        )
        cpu = CounterMetricFamily(
            "genai_engine_cpu_seconds",
            "CPU time of the model's owner thread in those steps (its own thread only)",
            labels=model,
        )
        steps = CounterMetricFamily(
            "genai_engine_steps", "Scheduler steps the model's owner thread ran", labels=model
        )
        for name, source in list(self.sources.items()):
            engine = source.stats().engine
            if engine is not None:
                busy.add_metric([name], engine.busy_seconds)
                cpu.add_metric([name], engine.cpu_seconds)
                steps.add_metric([name], engine.steps)
        yield from (busy, cpu, steps)
