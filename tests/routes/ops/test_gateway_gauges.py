"""The inference gateway's gauges on /metrics (vLLM's names), over the real app and demo model:
running and waiting sequences, KV-cache use while a sequence runs, the KV block config, and the
LoRA adapters requests use; /health and /v1/health beside /healthz."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from backends.types import KV_BLOCK_TOKENS
from tests.app.test_adapters import models_file
from tests.conftest import make_client, wait_ready
from tests.steps import Steps

pytestmark = pytest.mark.model

LONG = {
    "messages": [{"role": "user", "content": "hello"}],
    "max_tokens": 1900,
    "min_tokens": 1900,  # runs until it is cancelled, its steps granted by the test
    "stream": True,
}


def gauges(client: TestClient) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = client.get("/metrics").text
    return {
        family.name: [(s.labels, s.value) for s in family.samples]
        for family in text_string_to_metric_families(text)
        if family.name.startswith("vllm:")
    }


def value(client: TestClient, name: str) -> float:
    [(labels, found)] = gauges(client)[name]
    assert labels == {}
    return found


def kv(client: TestClient) -> float:
    return value(client, "vllm:kv_cache_usage_perc")


def both(client: TestClient) -> tuple[float, float]:
    """Running and waiting, from one scrape."""
    found = gauges(client)
    return found["vllm:num_requests_running"][0][1], found["vllm:num_requests_waiting"][0][1]


def listed(client: TestClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.get("/admin/requests").json()["data"]
    return found


@contextmanager
def running(client: TestClient, steps: Steps, bodies: list[dict[str, Any]]) -> Iterator[None]:
    """Streams ``bodies`` on threads while the block runs, then cancels them (admin). The model
    steps only as ``steps`` grants, so neither ends first, however fast the machine."""
    threads = [
        threading.Thread(target=lambda b=b: client.post("/v1/chat/completions", json=b))
        for b in bodies
    ]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        steps.until(lambda: len(listed(client)) == len(bodies))
        for entry in listed(client):
            client.post(f"/admin/requests/{entry['id']}/cancel")
        steps.free()
        for t in threads:
            t.join(30)


def test_idle_gauges_and_the_block_config() -> None:
    with make_client(max_concurrency=4) as client:
        wait_ready(client)
        found = gauges(client)
        assert found["vllm:num_requests_running"] == [({}, 0.0)]
        assert found["vllm:num_requests_waiting"] == [({}, 0.0)]
        assert found["vllm:kv_cache_usage_perc"] == [({}, 0.0)]
        [(config, one)] = found["vllm:cache_config_info"]
        # batch: 4 rows of the model's whole context (the KV budget holds them)
        context = client.get("/v1/models").json()["data"][0]["max_model_len"]
        assert config == {
            "block_size": str(KV_BLOCK_TOKENS),
            "num_gpu_blocks": str(4 * context // KV_BLOCK_TOKENS),
        }
        assert one == 1.0
        assert "vllm:lora_requests_info" not in found
        for path in ("/health", "/v1/health"):
            assert client.get(path).json() == client.get("/healthz").json()


@pytest.mark.parametrize("scheduler", ["batch", "generator", "engine"])
def test_a_running_and_a_waiting_sequence_and_the_kv_they_hold(
    scheduler: str, steps: Steps
) -> None:
    with make_client(max_concurrency=1, admin=True, scheduler=scheduler) as client:
        wait_ready(client)
        with running(client, steps, [LONG, LONG]):
            steps.until(lambda: both(client) == (1, 1) and kv(client) > 0)  # it read its prompt
            context = client.get("/v1/models").json()["data"][0]["max_model_len"]
            used = kv(client)
            # One row of one: the tokens it holds (prompt and output so far) of its capacity.
            assert used * context < 1900 + 64
            steps.until(lambda: kv(client) > used)  # it grows
        steps.until(lambda: value(client, "vllm:num_requests_running") == 0)  # freed: no grants
        assert kv(client) == 0.0


def test_lora_info_names_the_adapters_in_use(tmp_path: Path, steps: Steps) -> None:
    path = models_file(tmp_path)  # two adapters on the generator strategy
    with make_client(models_file=path, max_concurrency=1, admin=True) as client:
        wait_ready(client)
        [(idle, _)] = gauges(client)["vllm:lora_requests_info"]
        assert idle == {"running_lora_adapters": "", "waiting_lora_adapters": "", "max_lora": "2"}
        bodies = [{**LONG, "model": "pirate"}, {**LONG, "model": "poet"}]
        with running(client, steps, bodies):
            steps.until(lambda: both(client) == (1, 1) and kv(client) > 0)
            [(labels, when)] = gauges(client)["vllm:lora_requests_info"]
            assert {labels["running_lora_adapters"], labels["waiting_lora_adapters"]} == {
                "pirate",
                "poet",
            }
            assert labels["max_lora"] == "2"
            assert abs(when - time.time()) < 60  # a wall-clock time
            assert kv(client) > 0  # the generator's count
