"""The KV-event publisher's queue on /metrics: the batches it dropped (by model), the ones that
wait, and its bound."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from backends.engine.kv_events import AllBlocksCleared, KVEventPublisher
from metrics.kv_events import KVEventCollector

pytestmark = pytest.mark.unit


def test_a_full_queue_counts_each_batch_it_drops_by_model() -> None:
    # Never started: nothing drains the queue, so what does not fit is dropped.
    publisher = KVEventPublisher("tcp://127.0.0.1:0", True, lambda m: m, queue_size=3)
    registry = CollectorRegistry()
    registry.register(KVEventCollector(publisher))
    qwen, llama = publisher.sink("qwen"), publisher.sink("llama")
    for _ in range(4):
        qwen([AllBlocksCleared()])
    llama([AllBlocksCleared()])
    llama([])  # nothing to tell: nothing queued, nothing dropped
    text = generate_latest(registry).decode()
    assert 'genai_kv_events_dropped_total{model="qwen"} 1.0' in text
    assert 'genai_kv_events_dropped_total{model="llama"} 1.0' in text
    assert "genai_kv_events_queued 3.0" in text
    assert "genai_kv_events_queue_capacity 3.0" in text
