"""The residency policy (backends/core/residency.py) with fakes: which idle model is evicted,
when a keep-alive runs out, what counts against the cap, and Residents' one load at a time."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from backends.config import ModelConfig, ServiceConfig
from backends.core.residency import Residency, Residents, expired, occupied, victim

pytestmark = pytest.mark.unit


def slot(name: str, state: Any = "loaded", last_used: float = 0.0, keep: float = -1.0) -> Residency:
    config = ServiceConfig(ModelConfig(Path("x"), name=name))
    return Residency(name, config, state=state, keep_loaded=keep, last_used=last_used)


def test_the_least_recently_used_idle_model_is_evicted() -> None:
    a, b, c = slot("a", last_used=1), slot("b", last_used=2), slot("c", last_used=3)
    assert victim([(a, False), (b, False), (c, False)]) is a
    assert victim([(a, True), (b, False), (c, False)]) is b  # a busy model is never chosen


def test_none_is_evicted_when_every_loaded_model_is_busy_or_on_its_way() -> None:
    loading, queued = slot("l", state="loading"), slot("q", state="queued")
    assert victim([(slot("a"), True), (loading, False), (queued, False)]) is None


def test_a_keep_alive_runs_out_after_the_last_request_and_not_while_busy() -> None:
    s = slot("a", last_used=10.0, keep=5.0)
    assert not expired(s, busy=False, now=14.9)
    assert expired(s, busy=False, now=15.0)
    assert not expired(s, busy=True, now=99.0)
    assert not expired(slot("a", keep=-1.0), busy=False, now=1e9)  # -1: kept
    assert expired(slot("a", last_used=3.0, keep=0.0), busy=False, now=3.0)  # 0: at once


def test_loading_loaded_and_unloading_models_count_against_the_cap() -> None:
    states = ["unloaded", "queued", "loading", "loaded", "unloading"]
    assert occupied(slot(s, state=s) for s in states) == 3


class FakeService:
    """A core that takes a while to start, counting its starts."""

    starts = 0
    running = 0
    model_dir = Path("x")
    device = "cpu"

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config

    @property
    def model_name(self) -> str:
        return self.config.model.name

    async def start(self) -> None:
        FakeService.starts += 1
        FakeService.running += 1
        assert FakeService.running == 1, "two loads at once"
        await asyncio.sleep(0.05)
        FakeService.running -= 1

    async def stop(self) -> None:
        pass

    async def drain(self, timeout: float) -> int:
        return 0

    def stats(self) -> Any:
        return type("Stats", (), {"requests": ()})()


class Quiet:
    def on_loaded(self, name: str, seconds: float) -> None:
        pass

    def on_unloaded(self, name: str, reason: Any) -> None:
        pass


def test_concurrent_first_requests_share_one_load_and_the_cap_evicts() -> None:
    async def run() -> list[str]:
        configs = {n: ServiceConfig(ModelConfig(Path("x"), name=n, load="first_use")) for n in "ab"}
        services: dict[str, Any] = {n: FakeService(c) for n, c in configs.items()}

        def renew(name: str) -> None:
            services[name] = FakeService(configs[name])

        residents = Residents(services, renew, Quiet(), max_loaded=1, tick=0.01)
        for name, config in configs.items():
            residents.declare(name, config)

        async def use(name: str) -> None:
            async with residents.hold(name, None):
                await asyncio.sleep(0.01)

        await asyncio.gather(*(use("a") for _ in range(5)))
        assert FakeService.starts == 1
        await use("b")  # a is idle: evicted to make room
        await residents.close()
        return [s.state for s in residents.slots.values()]

    FakeService.starts = 0
    assert asyncio.run(run()) == ["unloaded", "loaded"]
    assert FakeService.starts == 2
