"""The model-server protocol of the Kubernetes inference gateway: pod-level gauges under the
names its endpoint picker reads, beside ours.

The Gateway API Inference Extension's protocol (docs/proposals/003-model-server-protocol) and
the llm-d router, its endpoint picker, read vLLM's names by default and take, for each name, the
first series that matches, so each is one series for the whole pod (every model summed). The
picker scrapes every ~50 ms and counts data older than 200 ms as saturated:

- ``vllm:num_requests_waiting`` and ``vllm:num_requests_running``: sequences, as
  ``genai_requests_waiting`` / ``genai_requests_running`` count them;
- ``vllm:kv_cache_usage_perc``: the running sequences' KV tokens over the KV capacity, 0 to 1
  (``backends.types.KVUsage``; what each strategy counts is in docs/deployment.md);
- ``vllm:cache_config_info{block_size,num_gpu_blocks}`` (value 1): the KV block and how many
  fit, which the approximate prefix scorer tunes itself by;
- ``vllm:lora_requests_info{running_lora_adapters,waiting_lora_adapters,max_lora}``, only
  where adapters are served: the adapters the running and the waiting requests use, comma
  separated, and how many can run at once (all served adapters: they are loaded with their
  model). Its value is the time it was read, since the picker takes the series with the
  greatest value.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from backends.core.model_service import ServiceStats
from backends.types import KVUsage


class Source(Protocol):
    @property
    def adapter_names(self) -> tuple[str, ...]: ...

    def stats(self) -> ServiceStats: ...


class ModelServerCollector(Collector):
    """Read off every model's stats at scrape time (no state of its own)."""

    def __init__(
        self, sources: Mapping[str, Source], clock: Callable[[], float] = time.time
    ) -> None:
        self.sources = sources
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        services = list(self.sources.values())
        stats = [s.stats() for s in services]
        waiting = GaugeMetricFamily(
            "vllm:num_requests_waiting", "Sequences waiting for a slot, every model"
        )
        waiting.add_metric([], sum(s.waiting for s in stats))
        running = GaugeMetricFamily(
            "vllm:num_requests_running", "Sequences being generated, every model"
        )
        running.add_metric([], sum(s.running for s in stats))
        yield from (waiting, running)
        usages = [s.kv for s in stats if s.kv is not None]
        kv = sum(usages, KVUsage(block_tokens=usages[0].block_tokens)) if usages else KVUsage()
        usage = GaugeMetricFamily(
            "vllm:kv_cache_usage_perc",
            "KV cache held by running sequences, of its capacity (0 to 1)",
        )
        usage.add_metric([], kv.fraction)
        yield usage
        if usages:
            config = GaugeMetricFamily(
                "vllm:cache_config_info",
                "KV cache block size (tokens) and capacity (blocks)",
                labels=["block_size", "num_gpu_blocks"],
            )
            config.add_metric([str(kv.block_tokens), str(kv.capacity_tokens // kv.block_tokens)], 1)
            yield config
        adapters = sum(len(s.adapter_names) for s in services)
        if adapters:
            yield self._lora(stats, adapters)

    def _lora(self, stats: list[ServiceStats], max_lora: int) -> Metric:
        in_use: dict[str, set[str]] = {"running": set(), "waiting": set()}
        for service in stats:
            for request in service.requests:
                if request.adapter is not None:
                    in_use[request.state].add(request.adapter)
        lora = GaugeMetricFamily(
            "vllm:lora_requests_info",
            "LoRA adapters the running and waiting requests use (value: when read)",
            labels=["running_lora_adapters", "waiting_lora_adapters", "max_lora"],
        )
        running, waiting = (",".join(sorted(in_use[s])) for s in ("running", "waiting"))
        lora.add_metric([running, waiting, str(max_lora)], self.clock())
        return lora
