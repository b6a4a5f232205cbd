"""Each model's owner-thread time on /metrics, read off fake models: one series per model
with an owner thread, none for one without."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from backends.core.model_service import ServiceStats
from backends.types import EngineTime
from metrics.engine_time import EngineTimeCollector

pytestmark = pytest.mark.unit


@dataclass
class Model:
    engine: EngineTime | None

    def stats(self) -> ServiceStats:
        return ServiceStats(0, 0, (), engine=self.engine)


def test_each_model_with_an_owner_thread_has_its_series() -> None:
    spent = EngineTime().after(0.5, 0.25).after(1.0, 0.75)
    assert spent == EngineTime(1.5, 1.0, 2)
    registry = CollectorRegistry()
    registry.register(EngineTimeCollector({"chat": Model(spent), "embedder": Model(None)}))
    found = {
        sample.name: (sample.labels, sample.value)
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert found == {
        "genai_engine_busy_seconds_total": ({"model": "chat"}, 1.5),
        "genai_engine_cpu_seconds_total": ({"model": "chat"}, 1.0),
        "genai_engine_steps_total": ({"model": "chat"}, 2.0),
    }
