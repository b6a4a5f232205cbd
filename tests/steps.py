"""The owner thread's steps, taken only as a test lets them.

A test that watches a request in flight (the gauges, the admin listing, a full queue) cannot
rest on the request outlasting the test: the demo model writes 1,900 tokens in about a second
on one machine and in less on a faster one. With :class:`Steps` installed, every model loaded
in the test takes a step only when the test grants one, so a request runs until it is
cancelled, on any machine. The steps themselves are the real model's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from backends.engine.choose import strategy_factory
from backends.engine.scheduler import Strategy


class Steps:
    def __init__(self, *, held: bool = True) -> None:
        self._cond = threading.Condition()
        self._granted = 0
        self._taken = 0
        self._free = not held
        self._pace: float | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Hold every generator service the test starts from now on."""

        def factory(*args: Any, **kwargs: Any) -> Callable[[Any], Strategy]:
            build = strategy_factory(*args, **kwargs)

            def held(model: Any) -> Strategy:
                strategy = build(model)
                step = strategy.step

                def held_step() -> None:
                    self._wait_for_grant()
                    step()

                strategy.step = held_step  # type: ignore[method-assign]
                return strategy

            return held

        monkeypatch.setattr("backends.core.service.strategy_factory", factory)

    def _wait_for_grant(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._free or self._taken < self._granted, self._pace)
            self._taken += 1

    def grant(self, n: int = 1) -> None:
        """Let the owner thread run up to ``n`` steps past those it took (grants it has not
        used yet count among them: an idle owner does not bank steps)."""
        with self._cond:
            self._granted = max(self._granted, self._taken + n)
            self._cond.notify_all()

    def free(self) -> None:
        """Let every step run, from now on (before the app shuts down, or it waits on one)."""
        with self._cond:
            self._free = True
            self._pace = None
            self._cond.notify_all()

    def pace(self, seconds: float) -> None:
        """Take a step at least every ``seconds``, granted or not: for a test that blocks on
        the owner thread (a request waiting for its prompt to be read there) and cannot grant.
        A request of 1,900 tokens then takes a step count times that long, seconds, not one."""
        with self._cond:
            self._pace = seconds
            self._cond.notify_all()

    def hold(self) -> None:
        """From the next step on, take steps only as granted."""
        with self._cond:
            self._free = False
            self._granted = self._taken

    def until(self, check: Callable[[], bool], timeout: float = 60.0) -> None:
        """Grant a step at a time until ``check()`` holds."""
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, "timed out"
            self.grant()
            time.sleep(0.01)


@contextmanager
def installed(*, held: bool) -> Iterator[Steps]:
    """:class:`Steps` over the models loaded inside the block, free again when it ends (a
    fixture's body; a module's fixture starts them free and a test holds them)."""
    steps = Steps(held=held)
    with pytest.MonkeyPatch.context() as patch:
        steps.install(patch)
        try:
            yield steps
        finally:
            steps.free()
