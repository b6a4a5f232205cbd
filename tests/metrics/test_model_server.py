"""The gateway's pod-level gauges (vLLM's names), read off fake models: one series per name for
the whole pod, KV usage as held over capacity, the block config, and the adapters in use."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from backends.core.model_service import RequestStats, ServiceStats
from backends.types import KVUsage
from metrics.model_server import ModelServerCollector

pytestmark = pytest.mark.unit


@dataclass
class Model:
    running: int = 0
    waiting: int = 0
    kv: KVUsage | None = None
    adapter_names: tuple[str, ...] = ()
    requests: list[RequestStats] = field(default_factory=list)

    def stats(self) -> ServiceStats:
        return ServiceStats(self.running, self.waiting, tuple(self.requests), kv=self.kv)


def request(state: str, adapter: str | None = None) -> RequestStats:
    return RequestStats("r", state, 10, 1, 0.5, adapter=adapter)  # type: ignore[arg-type]


def scrape(models: dict[str, Model]) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(ModelServerCollector(models, clock=lambda: 1234.5))
    text = generate_latest(registry).decode()
    return {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


def test_one_series_per_name_for_the_whole_pod() -> None:
    models = {
        "a": Model(running=2, waiting=1, kv=KVUsage(300, 1000)),
        "b": Model(running=1, waiting=3, kv=KVUsage(100, 1000)),
        "embedder": Model(running=1),  # no KV cache of its own: counts as load only
    }
    found = scrape(models)
    assert found["vllm:num_requests_running"] == [({}, 4.0)]
    assert found["vllm:num_requests_waiting"] == [({}, 4.0)]
    assert found["vllm:kv_cache_usage_perc"] == [({}, 0.2)]  # 400 of 2000 tokens
    assert found["vllm:cache_config_info"] == [({"block_size": "32", "num_gpu_blocks": "62"}, 1.0)]
    assert "vllm:lora_requests_info" not in found  # no adapter served: no family, as vLLM


def test_usage_is_a_fraction_and_zero_before_a_model_is_loaded() -> None:
    assert scrape({"a": Model(kv=KVUsage(5000, 1000))})["vllm:kv_cache_usage_perc"] == [({}, 1.0)]
    loading = scrape({"a": Model()})
    assert loading["vllm:kv_cache_usage_perc"] == [({}, 0.0)]
    assert "vllm:cache_config_info" not in loading  # nothing known about blocks yet


def test_lora_info_lists_the_adapters_running_and_waiting_requests_use() -> None:
    requests = [
        request("running", "pirate"),
        request("running", "pirate"),
        request("running"),  # the base model
        request("waiting", "poet"),
        request("waiting", "pirate"),
    ]
    models = {"lora": Model(adapter_names=("pirate", "poet"), requests=requests)}
    [(labels, value)] = scrape(models)["vllm:lora_requests_info"]
    assert labels == {
        "running_lora_adapters": "pirate",
        "waiting_lora_adapters": "pirate,poet",
        "max_lora": "2",
    }
    assert value == 1234.5  # when it was read: the picker takes the greatest
    idle = scrape({"lora": Model(adapter_names=("pirate", "poet"))})["vllm:lora_requests_info"]
    assert idle[0][0]["running_lora_adapters"] == idle[0][0]["waiting_lora_adapters"] == ""
