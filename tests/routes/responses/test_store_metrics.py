"""The stored Responses' gauges (metrics/responses_store.py): what the table holds, the
evictions this process made by reason, and the bounds, read at scrape time; a table out of
reach leaves its held count out rather than failing the scrape."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from metrics.responses_store import ResponseStoreCollector
from routes.responses.sqlite_store import SqliteStore
from routes.responses.store import StoredResponse, StoreLimits
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
    store = SqliteStore(None, StoreLimits(2, 1 << 20, 30.0), clock)
    registry = CollectorRegistry()
    registry.register(ResponseStoreCollector(store))
    for n in range(3):  # the third evicts the first
        store.put(StoredResponse(f"resp_{n}", {"output": []}, []))
    clock.now += 31
    store.put(StoredResponse("resp_3", {"output": []}, []))  # the other two expired
    got = samples(registry)
    assert got == {
        ("genai_responses_store_responses", ()): 1,
        ("genai_responses_store_bytes", ()): len('{"response": {"output": []}, "input": []}'),
        ("genai_responses_store_evictions_total", ("expired",)): 2,
        ("genai_responses_store_evictions_total", ("limit",)): 1,
        ("genai_responses_store_max_responses", ()): 2,
        ("genai_responses_store_max_bytes", ()): 1 << 20,
        ("genai_responses_store_ttl_seconds", ()): 30,
    }
    store.close()  # out of reach: no held count, the rest still scraped
    got = samples(registry)
    assert ("genai_responses_store_responses", ()) not in got
    assert got[("genai_responses_store_max_responses", ())] == 2


@pytest.mark.model
def test_the_server_exposes_them(client: TestClient) -> None:
    before = client.get("/metrics").text
    client.post("/v1/responses", json={"input": "Hi", "max_output_tokens": 2})
    after = client.get("/metrics").text
    held = "genai_responses_store_responses"
    assert metric(after, held) == metric(before, held) + 1
    assert metric(after, "genai_responses_store_max_responses") == 1000
    assert metric(after, "genai_responses_store_ttl_seconds") == 86400
