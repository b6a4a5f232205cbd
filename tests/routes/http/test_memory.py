"""Freed memory goes back to the system once the server is idle: malloc_trim runs a moment
after the last request in flight ends, once however many ended together, never while one
runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from routes.http.memory import TrimWhenIdle, limit_arenas, malloc_trim

pytestmark = pytest.mark.unit


def test_glibc_trim_is_found_here() -> None:
    assert malloc_trim() is not None  # the test machines run glibc


def test_trim_runs_once_after_the_last_request_and_not_while_one_runs() -> None:
    async def main() -> list[int]:
        gates = [asyncio.Event() for _ in range(2)]

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await gates[scope["n"]].wait()

        async def receive() -> Any:
            return {}

        async def send(message: Any) -> None:
            pass

        trim = TrimWhenIdle(app, idle=0.05)
        calls: list[int] = []
        trim._trim = lambda pad: calls.append(pad)
        seen = []
        tasks = [asyncio.create_task(trim({"type": "http", "n": n}, receive, send)) for n in (0, 1)]
        await asyncio.sleep(0.01)
        gates[0].set()
        await asyncio.sleep(0.15)  # one still runs: no trim
        seen.append(trim.trims)
        gates[1].set()
        await asyncio.gather(*tasks)
        seen.append(trim.trims)  # not yet: it waits to be idle for a moment
        await asyncio.sleep(0.2)
        seen.append(trim.trims)
        return [*seen, *calls]

    assert asyncio.run(main()) == [0, 0, 1, 0]


def test_arenas_are_capped_unless_the_operator_set_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_arenas() is False  # glibc read the operator's value at start
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert limit_arenas() is True
