"""The KV-event publisher on /metrics: batches dropped because its queue was full (by model),
and how many wait now, beside the queue's bound (backends/engine/kv_events.py).

Messages ZMQ drops past a subscriber's send high-water mark are not counted here: ZMQ does not
say; that subscriber sees a gap in the sequence numbers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class KVEventSource(Protocol):
    @property
    def dropped(self) -> Mapping[str, int]: ...
    @property
    def queued(self) -> int: ...
    @property
    def queue_size(self) -> int: ...


class KVEventCollector(Collector):
    """``genai_kv_events_dropped_total{model}``, ``genai_kv_events_queued`` and
    ``genai_kv_events_queue_capacity``."""

    def __init__(self, source: KVEventSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        dropped = CounterMetricFamily(
            "genai_kv_events_dropped",
            "KV-event batches dropped because the publisher's queue was full",
            labels=["model"],
        )
        for model, count in sorted(self.source.dropped.items()):
            dropped.add_metric([model], count)
        yield dropped
        yield GaugeMetricFamily(
            "genai_kv_events_queued",
            "KV-event batches waiting for the publisher's thread",
            value=self.source.queued,
        )
        yield GaugeMetricFamily(
            "genai_kv_events_queue_capacity",
            "KV-event batches the publisher's queue holds at most",
            value=self.source.queue_size,
        )
