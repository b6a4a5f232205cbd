"""Stored responses (``store: true``): a bounded table of response objects, kept for
``previous_response_id``, ``GET /v1/responses/{id}``, its ``input_items`` and ``DELETE``.

Two tables implement it: SQLite (routes/responses/sqlite_store.py: in memory by default, or a
file that several processes of one host share) and PostgreSQL
(routes/responses/postgres_store.py: one database that replicas on many hosts share). Either is
bounded three ways: a number of responses, a number of bytes (their JSON), and a time to live
from when each was stored. Past a bound the oldest go first; an expired one is gone for every
reader at once.

Each row is self-contained: a response's input items are the whole conversation before its
output (the chain it continued included), so evicting or deleting an earlier link never breaks
a later one. The price is that a long chain stores its early items again in every link; the
byte bound keeps that in check.

Each row belongs to an owner: the hash of the API key that made it (routes/http/auth.py), or
None without keys. A reader sees only its own owner's rows; to any other, a row does not exist.
The table keeps an HMAC of that hash under its own secret (made at random with the table, kept
in it, so every replica agrees), not the hash itself: a key cannot be guessed back from the
rows without the secret, nor a row matched with the same key's hash elsewhere.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from backends.errors import GenAIError

log = logging.getLogger("genai.responses")

# Why a stored response was dropped before anyone deleted it.
EXPIRED, OVER_LIMIT = "expired", "limit"
T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True)
class StoredResponse:
    """A response as its client got it (the JSON of the response object), and the input items
    it answered: the whole conversation before its output, each item with its ``id``."""

    id: str
    response: dict[str, Any]
    input: list[dict[str, Any]]
    # What the model read and wrote for it ({"model", "text", "ids"}), for a response that
    # continues it to start from exactly those tokens; None when it was not kept.
    transcript: dict[str, Any] | None = None
    owner: str | None = None  # the hash of the key that made it; None without keys

    def conversation(self) -> list[dict[str, Any]]:
        """What a response that continues this one starts from: its input, then its output."""
        return [*self.input, *self.response["output"]]


@dataclass(frozen=True)
class StoreLimits:
    max_responses: int
    max_bytes: int
    ttl: float  # seconds


class ResponseStore(Protocol):
    """What the Responses routes need of a table; every method is a short blocking call (run
    it off the event loop, through ``calls``), safe from any thread. The reads and writes
    raise :class:`StoreUnavailable` when the table cannot be reached."""

    limits: StoreLimits
    evictions: Evictions
    calls: StoreCalls

    def put(self, stored: StoredResponse) -> bool:
        """Keep ``stored`` (evicting the oldest past a bound); False when it alone is larger
        than the byte bound, and so is not kept."""
        ...

    def get(self, response_id: str, owner: str | None = None) -> StoredResponse | None:
        """The response, unless it is unknown, expired, deleted or another owner's."""
        ...

    def delete(self, response_id: str, owner: str | None = None) -> bool:
        """Forget the response; False when there was none of this owner's to forget."""
        ...

    def usage(self) -> tuple[int, int] | None:
        """(responses, bytes) held, expired ones included until the next write; None when
        the table cannot be reached (a metrics scrape must not fail for it)."""
        ...

    def close(self) -> None: ...


class StoreUnavailable(GenAIError):
    """The table cannot be reached (a database down, a file locked too long): 503."""

    status_code = 503
    error_type = "service_unavailable"
    code = "responses_store_unavailable"


class StoreCalls:
    """The store's blocking calls, off the event loop on their own few threads (never the
    default pool, which other routes' work shares: a slow database must not delay them), each
    answered within ``deadline`` seconds or a :class:`StoreUnavailable`. At most ``queued``
    calls wait for a thread; more are a 503 at once. A call past its deadline may still finish
    on its thread (the table's own timeouts end it soon after)."""

    def __init__(self, threads: int, deadline: float, queued: int = 16) -> None:
        self.deadline = deadline
        self._room = threading.BoundedSemaphore(threads + queued)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="genai-responses-store")

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        if not self._room.acquire(blocking=False):
            raise _unavailable("too many calls are waiting for it")
        try:
            future = self._pool.submit(fn, *args)
        except BaseException:
            self._room.release()
            raise
        future.add_done_callback(lambda _: self._room.release())  # run, failed or cancelled
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.deadline)
        except TimeoutError:
            raise _unavailable(f"no answer within {self.deadline:g} s") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _unavailable(why: str) -> StoreUnavailable:
    log.warning("stored responses: %s", why)
    return StoreUnavailable(f"The stored responses cannot be reached now ({why}); retry later.")


class UnknownSchema(Exception):
    """The table was laid out by a newer server than this one: a version it does not know."""


class Evictions:
    """Responses this process dropped, by reason (EXPIRED, OVER_LIMIT); in a table that several
    processes share, each counts the ones it dropped, so their sum is the table's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = {EXPIRED: 0, OVER_LIMIT: 0}

    def add(self, reason: str, n: int) -> None:
        if n > 0:
            with self._lock:
                self.counts[reason] += n


def too_large(stored: StoredResponse, size: int, limits: StoreLimits) -> bool:
    """True (and the log says why) when ``stored`` alone exceeds the byte bound."""
    if size <= limits.max_bytes:
        return False
    log.warning(
        "response %s not stored: its %d bytes exceed GENAI_RESPONSES_MAX_MIB", stored.id, size
    )
    return True


def encode(stored: StoredResponse) -> tuple[str, int]:
    """The row's body (the JSON kept: response, input items and transcript) and its bytes."""
    kept: dict[str, Any] = {"response": stored.response, "input": stored.input}
    if stored.transcript is not None:
        kept["transcript"] = stored.transcript
    body = json.dumps(kept)
    return body, len(body.encode())


def decode(response_id: str, body: str, owner: str | None) -> StoredResponse:
    kept = json.loads(body)
    return StoredResponse(
        response_id, kept["response"], kept["input"], kept.get("transcript"), owner
    )


def oldest_to_evict(
    count: int, size: int, limits: StoreLimits, oldest: Iterable[tuple[int, int]]
) -> int | None:
    """The newest ``seq`` of the oldest rows (``(seq, bytes)``, oldest first) to drop so that
    both bounds hold again for a table of ``count`` rows and ``size`` bytes; None if they do."""
    last = None
    for seq, bytes_ in oldest:
        if count <= limits.max_responses and size <= limits.max_bytes:
            break
        last, count, size = seq, count - 1, size - bytes_
    return last


def new_secret() -> str:
    """A table's owner secret, as it keeps it (hex)."""
    return secrets.token_hex(32)


def owner_hash(secret: bytes, owner: str | None) -> str | None:
    """What a table keeps for ``owner`` (None stays None: no keys)."""
    if owner is None:
        return None
    return "hmac-sha256:" + hmac.new(secret, owner.encode(), hashlib.sha256).hexdigest()


def migrate(
    where: str,
    current: int,
    migrations: Sequence[Sequence[S]],
    run: Callable[[S], object],
    set_version: Callable[[int], object],
) -> None:
    """Bring a table at schema version ``current`` (0: none yet) to the newest one, running
    each later migration's steps in order (``run`` runs one: a statement, or a function of the
    caller's; the caller holds one transaction and a lock around it); refuse a version newer
    than this server knows."""
    known = len(migrations)
    if current > known:
        raise UnknownSchema(
            f"{where} holds stored Responses in schema version {current}, and this server "
            f"knows versions up to {known}: a newer server made it. Run that version, or "
            "point GENAI_RESPONSES_DB at another database."
        )
    for version in range(current + 1, known + 1):
        for statement in migrations[version - 1]:
            run(statement)
        set_version(version)
        log.info("%s: stored Responses' schema migrated to version %d", where, version)
