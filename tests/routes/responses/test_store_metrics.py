"""The stored Responses' gauges (metrics/responses_store.py): what the table holds, how many
keys hold some and how many are at their quota (counted, never a label per key), the evictions
this process made by reason, and the bounds and each key's quota; a table out of reach leaves
its held count out rather than failing the scrape, and a slow one never makes a scrape wait."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from metrics.responses_store import ResponseStoreCollector
from routes.responses.sqlite_store import SqliteStore
from routes.responses.store import Evictions, StoredResponse, StoreLimits
from tests.conftest import metric


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[str, ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(s.labels.values())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("genai_responses_store_")
    }


@pytest.mark.unit
def test_the_gauges_follow_the_table() -> None:
    clock = Clock()
    store = SqliteStore(None, StoreLimits(2, 1 << 20, 30.0, 1, 1 << 10), clock)
    registry = CollectorRegistry()
    collector = ResponseStoreCollector(store, max_age=3600)  # read now, then when refreshed
    registry.register(collector)
    assert samples(registry)[("genai_responses_store_responses", ())] == 0
    for n in range(3):  # the third evicts the first
        store.put(StoredResponse(f"resp_{n}", {"output": []}, []))
    clock.now += 31
    store.put(StoredResponse("resp_3", {"output": []}, []))  # the other two expired
    for n in (4, 5):  # a key's second evicts its first (its quota is 1)
        store.put(StoredResponse(f"resp_{n}", {"output": []}, [], owner="sha256:aa"))
    assert samples(registry)[("genai_responses_store_responses", ())] == 0, "not read again"
    collector.refresh()
    got = samples(registry)
    assert got == {
        ("genai_responses_store_responses", ()): 2,
        ("genai_responses_store_bytes", ()): 2 * len('{"response": {"output": []}, "input": []}'),
        ("genai_responses_store_keys", ()): 1,
        ("genai_responses_store_keys_at_quota", ()): 1,
        ("genai_responses_store_evictions_total", ("expired",)): 2,
        ("genai_responses_store_evictions_total", ("limit",)): 1,
        ("genai_responses_store_evictions_total", ("key_limit",)): 1,
        ("genai_responses_store_max_responses", ()): 2,
        ("genai_responses_store_max_bytes", ()): 1 << 20,
        ("genai_responses_store_ttl_seconds", ()): 30,
        ("genai_responses_store_key_max_responses", ()): 1,
        ("genai_responses_store_key_max_bytes", ()): 1 << 10,
    }
    store.close()  # out of reach: no held count, the rest still scraped
    collector.refresh()
    got = samples(registry)
    assert ("genai_responses_store_responses", ()) not in got
    assert ("genai_responses_store_keys", ()) not in got
    assert got[("genai_responses_store_max_responses", ())] == 2


class SlowStore:
    """A table whose count takes ``delay`` seconds to read (a database far away, or gone)."""

    def __init__(self, delay: float) -> None:
        self.delay, self.count = delay, 0
        self.limits = StoreLimits(2, 1 << 20, 30.0)
        self.evictions = Evictions()
        self.reads = threading.Semaphore(0)

    def usage(self) -> tuple[int, int] | None:
        time.sleep(self.delay)
        self.reads.release()
        return self.count, 0

    def keys(self) -> tuple[int, int] | None:
        return 0, 0


@pytest.mark.unit
def test_a_slow_table_never_makes_a_scrape_wait() -> None:
    store = SlowStore(0.0)
    registry = CollectorRegistry()
    registry.register(ResponseStoreCollector(store, max_age=0.0))
    assert store.reads.acquire(timeout=1)  # the first read, made when registered
    store.delay, store.count = 2.0, 5
    started = time.perf_counter()
    got = samples(registry)  # stale: it starts a read, and answers with the last count
    assert time.perf_counter() - started < 1.0
    assert got[("genai_responses_store_responses", ())] == 0
    store.delay = 0.0
    deadline = time.monotonic() + 10
    while samples(registry)[("genai_responses_store_responses", ())] != 5:
        assert time.monotonic() < deadline, "the background read did not land"
        time.sleep(0.05)


@pytest.mark.model
def test_the_server_exposes_them(client: TestClient) -> None:
    held = "genai_responses_store_responses"
    store = client.app.state.responses  # type: ignore[attr-defined]
    made = client.post("/v1/responses", json={"input": "Hi", "max_output_tokens": 2}).json()
    assert store.get(made["id"]) is not None
    count = store.usage()[0]
    deadline = time.monotonic() + 10  # read again in the background, once a second
    while metric(after := client.get("/metrics").text, held) != count:
        assert time.monotonic() < deadline, f"the gauge did not come to {count}"
        time.sleep(0.1)
    assert metric(after, "genai_responses_store_max_responses") == 1000
    assert metric(after, "genai_responses_store_key_max_responses") == 250, "a quarter"
    assert metric(after, "genai_responses_store_key_max_bytes") == 16 * 1024 * 1024
    assert metric(after, "genai_responses_store_ttl_seconds") == 86400
