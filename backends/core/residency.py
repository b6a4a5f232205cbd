"""Which models stay loaded: each model's residency, the two decisions about it as plain
functions (unit-tested with fakes), and :class:`Residents`, which acts on them for the registry.

- A loaded model expires ``keep_loaded`` seconds after its last request (negative: never).
- When a model must load and ``max_loaded`` are loaded (or loading), the least recently used
  idle one is evicted; a model serving requests (or about to) is never chosen.
- One load of a model at a time: the first request that needs it starts it, the others wait
  for that one. Loading and unloading are the cores' own ``start`` and ``drain``/``stop``, the
  same calls the admin routes' loads and unloads make.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from backends.config import ServiceConfig
from backends.errors import NotReady, RequestTimedOut

if TYPE_CHECKING:
    from backends.core.model_service import ModelService

log = logging.getLogger("genai.registry")
# The models the current request (task) holds already.
_HELD: ContextVar[frozenset[str]] = ContextVar("held_models", default=frozenset())

# unloaded -> queued (a request wants it; waiting for room) -> loading -> loaded -> unloading
# -> unloaded. Loading, loaded and unloading ones hold memory: they count against the cap.
State = Literal["unloaded", "queued", "loading", "loaded", "unloading"]
UnloadReason = Literal["idle", "evicted", "admin"]
HOLDS_MEMORY: tuple[State, ...] = ("loading", "loaded", "unloading")


@dataclass
class Residency:
    """One declared model's place in memory (the registry's, read and written on the loop)."""

    name: str
    config: ServiceConfig
    state: State = "unloaded"
    keep_loaded: float = -1.0  # seconds after its last request; negative: never by itself
    last_used: float = 0.0  # the clock when a request last held it or was seen running
    leases: int = 0  # requests between their lookup and their queueing (they then show in stats)
    loads: int = 0  # how many times it was loaded (the timeline, the tests)

    @property
    def default_keep_loaded(self) -> float:
        return self.config.model.keep_loaded

    def expires_in(self, now: float) -> float | None:
        """Seconds until it would expire if nothing used it; None: never."""
        if self.keep_loaded < 0:
            return None
        return max(0.0, self.last_used + self.keep_loaded - now)


def expired(slot: Residency, busy: bool, now: float) -> bool:
    """A loaded, idle model whose keep-alive has run out since its last request."""
    if slot.state != "loaded" or busy or slot.keep_loaded < 0:
        return False
    return now - slot.last_used >= slot.keep_loaded


def occupied(slots: Iterable[Residency]) -> int:
    """Models holding memory now (loading, loaded or unloading)."""
    return sum(slot.state in HOLDS_MEMORY for slot in slots)


def victim(slots: Iterable[tuple[Residency, bool]]) -> Residency | None:
    """The least recently used loaded model that serves nothing (``(slot, busy)`` pairs);
    None when every loaded model is busy."""
    idle = [slot for slot, busy in slots if slot.state == "loaded" and not busy]
    return min(idle, key=lambda slot: slot.last_used, default=None)


class Watcher(Protocol):
    """Told of every load and unload (metrics)."""

    def on_loaded(self, name: str, seconds: float) -> None: ...

    def on_unloaded(self, name: str, reason: UnloadReason) -> None: ...


class Residents:
    """Every declared model's residency, on the event loop. ``services`` is the registry's
    map of cores (read here); ``renew(name)`` puts a fresh, never-started core in place of
    one that was stopped (a core's owner thread runs once)."""

    def __init__(
        self,
        services: Mapping[str, ModelService],
        renew: Callable[[str], None],
        watcher: Watcher,
        *,
        max_loaded: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        tick: float = 0.25,
    ) -> None:
        self.slots: dict[str, Residency] = {}
        self.draining = False  # while the server drains, nothing expires
        self._services = services
        self._renew = renew
        self._watcher = watcher
        self._max_loaded = max_loaded
        self._clock = clock
        self._tick = tick
        self._tasks: dict[str, asyncio.Future[None]] = {}  # the load or unload under way
        self._room: asyncio.Lock | None = None  # one decision about room at a time
        self._reaper: asyncio.Task[None] | None = None

    # ---- the registry's bookkeeping ------------------------------------------------------
    def declare(self, name: str, config: ServiceConfig) -> None:
        """A model the registry serves. One loaded at start is "loading" from here until the
        registry's start has loaded it: requests meanwhile get its own 503, as they always
        have, rather than a second load."""
        state: State = "loading" if config.model.load == "start" else "unloaded"
        self.slots[name] = Residency(name, config, state, keep_loaded=config.model.keep_loaded)

    def forget(self, name: str) -> None:
        self.slots.pop(name, None)

    def loading(self, names: Iterable[str]) -> None:
        """``names`` are being loaded at start, by the registry itself."""
        for name in names:
            self.slots[name].state = "loading"

    def loaded(self, names: Iterable[str]) -> None:
        now = self._clock()
        for name in names:
            slot = self.slots[name]
            slot.state, slot.last_used = "loaded", now
            slot.loads += 1

    def watch(self) -> None:
        """Start expiring idle models (on the running loop)."""
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for task in list(self._tasks.values()):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task

    async def settled(self, name: str) -> None:
        """Wait for the load or unload of ``name`` under way, if any (whatever its end)."""
        task = self._tasks.get(name)
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)

    # ---- what the registry asks -----------------------------------------------------------
    def is_loaded(self, name: str) -> bool:
        slot = self.slots.get(name)
        return slot is not None and slot.state in ("loading", "loaded")

    def expires_in(self, name: str) -> float | None:
        """Seconds until ``name`` is unloaded if no request comes (a busy model: its whole
        keep-alive, which starts after its last request); None: never."""
        slot = self.slots[name]
        if slot.keep_loaded < 0:
            return None
        if self._busy(slot):
            return slot.keep_loaded
        return slot.expires_in(self._clock())

    @asynccontextmanager
    async def hold(self, name: str, keep_loaded: float | None) -> AsyncIterator[ModelService]:
        """``name`` loaded and kept while held. The request's outermost hold sets how long it
        stays after the request (None: its own setting); a hold inside it (the registry's
        ``submit`` under a door's hold) changes nothing."""
        slot = self.slots[name]
        held = _HELD.get()
        token = _HELD.set(held | {name})
        slot.leases += 1
        try:
            service = await self._ensure(slot)
            if name not in held:
                slot.keep_loaded = slot.default_keep_loaded if keep_loaded is None else keep_loaded
            slot.last_used = self._clock()
            yield service
        finally:
            slot.leases -= 1
            slot.last_used = self._clock()
            _HELD.reset(token)

    async def load(self, name: str) -> None:
        """Load ``name`` now (an admin's load): what loading raised, raised as it is."""
        slot = self.slots[name]
        slot.state = "queued"
        await self._track(name, self._load(slot, plain=True))

    # ---- loading and unloading ------------------------------------------------------------
    async def _ensure(self, slot: Residency) -> ModelService:
        """``slot``'s core, loaded: by this call, or by the load under way."""
        timeout = slot.config.limits.request_timeout
        deadline = None if timeout is None else self._clock() + timeout
        while slot.state != "loaded":
            task = self._tasks.get(slot.name)
            if task is None and slot.state == "loading":  # the registry's start loads it
                break
            if task is None:  # not in memory, and nobody is loading it: this request does
                slot.state = "queued"
                task = self._track(slot.name, self._load(slot))
            left = None if deadline is None else max(0.0, deadline - self._clock())
            try:
                await asyncio.wait_for(asyncio.shield(task), left)
            except asyncio.TimeoutError:
                raise RequestTimedOut(
                    f"The model {slot.name!r} was not loaded within the request's timeout; "
                    "retry later."
                ) from None
        return self._services[slot.name]

    def _track(self, name: str, work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        task: asyncio.Future[None] = asyncio.ensure_future(work)
        self._tasks[name] = task

        def done(_: asyncio.Future[None]) -> None:
            if self._tasks.get(name) is task:
                del self._tasks[name]

        task.add_done_callback(done)
        return task

    async def _load(self, slot: Residency, plain: bool = False) -> None:
        """Make room (evicting idle models, least recently used first, or waiting for one to
        go idle), then start ``slot``'s core. A failure leaves it unloaded with a fresh core,
        for the next request to try again, and raises a 503 (``plain``: what loading
        raised)."""
        if self._room is None:
            self._room = asyncio.Lock()
        async with self._room:
            await self._make_room()
            slot.state = "loading"
        service = self._services[slot.name]
        log.info("model %r loading", slot.name)
        began = time.perf_counter()
        try:
            await service.start()
        except Exception as exc:
            log.error("model %r failed to load: %s", slot.name, exc)
            await service.stop()
            slot.state = "unloaded"
            if self.slots.get(slot.name) is slot:
                self._renew(slot.name)
            if plain:
                raise
            raise NotReady(
                f"The model {slot.name!r} failed to load; the server's log says why."
            ) from None
        seconds = time.perf_counter() - began
        slot.state, slot.last_used = "loaded", self._clock()
        slot.loads += 1
        self._watcher.on_loaded(slot.name, seconds)
        log.info(
            "model %r loaded from %s on %s in %.2f s",
            slot.name,
            service.model_dir,
            service.device,
            seconds,
        )

    async def _make_room(self) -> None:
        cap = self._max_loaded
        while cap is not None and occupied(self.slots.values()) >= cap:
            chosen = self._victim()
            if chosen is None:  # every model in memory is busy: wait for one to go idle
                await asyncio.sleep(self._tick)
                continue
            await self._unload(chosen, "evicted")

    def _victim(self) -> Residency | None:
        return victim((slot, self._busy(slot)) for slot in self.slots.values())

    def _busy(self, slot: Residency) -> bool:
        """Held by a request on its way, or serving one (running or waiting)."""
        return slot.leases > 0 or bool(self._services[slot.name].stats().requests)

    def _unload(self, slot: Residency, reason: UnloadReason) -> asyncio.Future[None]:
        """Take an idle model out of memory; it stays declared and loads again on use."""
        slot.state = "unloading"  # from here requests wait for it to load again
        return self._track(slot.name, self._unload_now(slot, reason))

    async def _unload_now(self, slot: Residency, reason: UnloadReason) -> None:
        service = self._services[slot.name]
        cancelled = await service.drain(0)  # idle when chosen, and nothing entered since
        await service.stop()
        slot.state = "unloaded"
        if self.slots.get(slot.name) is slot:
            self._renew(slot.name)
        self._watcher.on_unloaded(slot.name, reason)
        log.info("model %r unloaded (%s; %d sequences cancelled)", slot.name, reason, cancelled)

    async def _reap(self) -> None:
        """Every tick: unload the idle models whose keep-alive ran out; a busy model's
        keep-alive starts again from now."""
        while True:
            await asyncio.sleep(self._tick)
            if self.draining:
                continue
            now = self._clock()
            for slot in list(self.slots.values()):
                if slot.state != "loaded":
                    continue
                busy = self._busy(slot)
                if busy:
                    slot.last_used = now
                elif expired(slot, busy, now):
                    self._unload(slot, "idle")
