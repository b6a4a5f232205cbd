"""Memory a burst of requests freed goes back to the system once the server is idle.

Python, NumPy, onnxruntime and the tokenizers all allocate through the C library's malloc, and
glibc keeps what they free for reuse, in every thread's arena: after a 15 MiB body, eight
25-megapixel images or ten minutes of audio, the process stayed near its peak (issue 37).
:class:`TrimWhenIdle` (pure ASGI) counts the requests in flight; a moment after the last one
ends, it calls glibc's ``malloc_trim(0)`` off the event loop, which hands the free pages of
every arena back. Under steady load nothing is trimmed (the memory is in use again at once).
:func:`limit_arenas` caps glibc's arenas at two (unless ``MALLOC_ARENA_MAX`` says otherwise):
with one per thread (sixteen here: owner threads, onnxruntime's pools, executor threads) what
each kept in pieces added up. Without glibc (musl, macOS) both do nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("genai.memory")

IDLE_SECONDS = 1.0


ARENAS = 2
M_ARENA_MAX = -8  # glibc's mallopt parameter


def _libc(function: str) -> Any:
    """A function of the C library, or None where it has none."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return getattr(libc, function, None)


def malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    trim = _libc("malloc_trim")
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def limit_arenas(count: int = ARENAS) -> bool:
    """At most ``count`` malloc arenas for the threads started from now on; whether it was
    set. An operator's ``MALLOC_ARENA_MAX`` (read by glibc at start) is left as it is."""
    mallopt = _libc("mallopt")
    if mallopt is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, count))


class TrimWhenIdle:
    def __init__(self, app: ASGIApp, idle: float = IDLE_SECONDS) -> None:
        self.app = app
        self.idle = idle
        self.inflight = 0
        self.trims = 0  # how many times memory was handed back (tests read it)
        self._trim = malloc_trim()
        self._timer: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._trim is None:
            await self.app(scope, receive, send)
            return
        self.inflight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.inflight -= 1
            if self.inflight == 0:
                self._later(asyncio.get_running_loop())

    def _later(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(self.idle, self._when_idle, loop)

    def _when_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if self.inflight == 0:
            loop.run_in_executor(None, self._run)

    def _run(self) -> None:
        self._trim(0)
        self.trims += 1
