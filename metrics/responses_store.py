"""The stored Responses' table on /metrics: what it holds, what this process dropped from it,
and its bounds (GENAI_RESPONSES_MAX, _MAX_MIB, _TTL) and each key's quota (GENAI_RESPONSES_KEY_MAX,
_KEY_MAX_MIB), so an operator sees how full it is without probing it. Keys are counted (how
many hold responses, how many are at their quota), never labelled: a label per key would let
clients grow /metrics.

What it holds is a query (a round trip to PostgreSQL), so a scrape never makes it: it reports
the last count read, and asks for a new one in the background once that is over a second old.
A scrape stays as fast as the rest of /metrics (routers poll it, and read a slow answer as a
saturated server) even while the database is slow or gone.

A table that several replicas share (PostgreSQL, or a SQLite file of several workers) reports
the same held count and bytes from each of them (take the max, not the sum, across replicas);
each reports the evictions it made itself (those do sum).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class Limits(Protocol):
    @property
    def max_responses(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def ttl(self) -> float: ...
    @property
    def per_key(self) -> tuple[int, int]: ...


class Evictions(Protocol):
    @property
    def counts(self) -> Mapping[str, int]: ...


class StoreSource(Protocol):
    """routes/responses/store.py's ResponseStore, as far as the metrics read it."""

    @property
    def limits(self) -> Limits: ...
    @property
    def evictions(self) -> Evictions: ...
    def usage(self) -> tuple[int, int] | None: ...
    def keys(self) -> tuple[int, int] | None: ...


class ResponseStoreCollector(Collector):
    """``genai_responses_store_*``; the held count and bytes are left out of a scrape when the
    table could not be reached at the last read (its database down), the rest is this
    process's own."""

    def __init__(self, store: StoreSource, max_age: float = 1.0) -> None:
        self.store = store
        self.max_age = max_age  # seconds a count read may be reported before a new read
        self._lock = threading.Lock()
        self._reading = False
        self._usage: tuple[int, int] | None = None
        self._keys: tuple[int, int] | None = None
        self._read_at = 0.0
        self.refresh()

    def refresh(self) -> None:
        """Read what the table holds now (blocking: the scrape's background thread)."""
        usage = keys = None
        try:
            usage = self.store.usage()
            keys = self.store.keys() if usage is not None else None
        finally:
            with self._lock:
                self._usage, self._keys = usage, keys
                self._read_at, self._reading = time.monotonic(), False

    def _latest(self) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """The last counts read (the table's, its keys'); a new read started in the
        background when they are stale."""
        with self._lock:
            start = not self._reading and time.monotonic() - self._read_at > self.max_age
            self._reading |= start
            usage, keys = self._usage, self._keys
        if start:
            threading.Thread(target=self.refresh, name="responses-store-usage", daemon=True).start()
        return usage, keys

    def collect(self) -> Iterator[Metric]:
        store, limits = self.store, self.store.limits
        usage, keys = self._latest()
        held = GaugeMetricFamily(
            "genai_responses_store_responses",
            "Stored Responses held (expired ones included until the next write)",
        )
        size = GaugeMetricFamily(
            "genai_responses_store_bytes", "Bytes of stored Responses held (their JSON)"
        )
        if usage is not None:
            held.add_metric([], usage[0])
            size.add_metric([], usage[1])
        holding = GaugeMetricFamily(
            "genai_responses_store_keys", "API keys holding stored Responses (read as the count)"
        )
        full = GaugeMetricFamily(
            "genai_responses_store_keys_at_quota",
            "API keys at their quota: holding GENAI_RESPONSES_KEY_MAX responses, or 90% of "
            "GENAI_RESPONSES_KEY_MAX_MIB (their next response evicts their own oldest)",
        )
        if keys is not None:
            holding.add_metric([], keys[0])
            full.add_metric([], keys[1])
        evictions = CounterMetricFamily(
            "genai_responses_store_evictions",
            "Stored Responses this process dropped before they were deleted: past their time "
            "to live (expired), to keep within the bounds (limit) or within their key's quota "
            "(key_limit)",
            labels=["reason"],
        )
        for reason, count in sorted(store.evictions.counts.items()):
            evictions.add_metric([reason], count)
        yield from (held, size, holding, full, evictions)
        yield GaugeMetricFamily(
            "genai_responses_store_max_responses",
            "Stored Responses kept at most (GENAI_RESPONSES_MAX)",
            value=limits.max_responses,
        )
        yield GaugeMetricFamily(
            "genai_responses_store_max_bytes",
            "Bytes of stored Responses kept at most (GENAI_RESPONSES_MAX_MIB)",
            value=limits.max_bytes,
        )
        yield GaugeMetricFamily(
            "genai_responses_store_ttl_seconds",
            "Seconds a stored Response is kept (GENAI_RESPONSES_TTL)",
            value=limits.ttl,
        )
        yield GaugeMetricFamily(
            "genai_responses_store_key_max_responses",
            "Stored Responses one API key keeps at most (GENAI_RESPONSES_KEY_MAX)",
            value=limits.per_key[0],
        )
        yield GaugeMetricFamily(
            "genai_responses_store_key_max_bytes",
            "Bytes of stored Responses one API key keeps at most (GENAI_RESPONSES_KEY_MAX_MIB)",
            value=limits.per_key[1],
        )
