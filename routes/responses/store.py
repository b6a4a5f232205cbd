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

The bounds are fair between keys: each key has its own quota (a number and bytes, a share of
the table's), and past it only that key's oldest go. The table's own bounds, reached by many
keys at once, take the oldest of the key that holds the most (by number past the count bound,
by bytes past the byte bound), never the oldest of all: a key that keeps few loses them only
when every other key keeps as few. Rows stored without keys (owner None) count as one holder,
with no quota of its own; without keys that is the only holder, oldest first as ever. A table
keeps each owner's count and bytes beside the rows (by triggers, as its totals), so neither
choice scans the rows.

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

# Why a stored response was dropped before anyone deleted it: expired, to keep the table's
# bounds, or to keep its key's quota.
EXPIRED, OVER_LIMIT, OVER_KEY_LIMIT = "expired", "limit", "key_limit"
# A key is at its quota (on the gauge) holding its count quota, or this share of its bytes.
FULL_BYTES = 0.9
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
    # Each key's own quota; None: the table's bound (and never more than it).
    key_responses: int | None = None
    key_bytes: int | None = None

    @property
    def per_key(self) -> tuple[int, int]:
        """(responses, bytes) one key keeps at most."""
        return (
            min(self.key_responses or self.max_responses, self.max_responses),
            min(self.key_bytes or self.max_bytes, self.max_bytes),
        )

    @property
    def table(self) -> tuple[int, int]:
        return self.max_responses, self.max_bytes


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

    def keys(self) -> tuple[int, int] | None:
        """(keys holding responses, keys at their quota: its count, or FULL_BYTES of its
        bytes), as :meth:`usage` counts; None when the table cannot be reached."""
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
        self.counts = {EXPIRED: 0, OVER_LIMIT: 0, OVER_KEY_LIMIT: 0}

    def add(self, reason: str, n: int) -> None:
        if n > 0:
            with self._lock:
                self.counts[reason] += n


def too_large(stored: StoredResponse, size: int, limits: StoreLimits) -> bool:
    """True (and the log says why) when ``stored`` alone exceeds the byte bound (its key's,
    when it has one)."""
    keyed = stored.owner is not None and limits.per_key[1] < limits.max_bytes
    if size <= (limits.per_key[1] if keyed else limits.max_bytes):
        return False
    bound = "GENAI_RESPONSES_KEY_MAX_MIB" if keyed else "GENAI_RESPONSES_MAX_MIB"
    log.warning("response %s not stored: its %d bytes exceed %s", stored.id, size, bound)
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


def oldest_to_free(
    rows: int, size: int, oldest: Iterable[tuple[int, int]]
) -> tuple[int | None, int, int]:
    """The newest ``seq`` of the oldest rows (``(seq, bytes)``, oldest first) that free at
    least ``rows`` rows and ``size`` bytes (all of them if they cannot), and what they free."""
    last, freed_rows, freed = None, 0, 0
    for seq, bytes_ in oldest:
        if freed_rows >= rows and freed >= size:
            break
        last, freed_rows, freed = seq, freed_rows + 1, freed + bytes_
    return last, freed_rows, freed


@dataclass(frozen=True)
class Holder:
    """One owner's rows in a table ('' for rows without one), the newest row left out."""

    owner: str
    count: int
    bytes: int


def fair_share(
    count: int, size: int, bounds: tuple[int, int], top: Sequence[Holder]
) -> tuple[str, int, int] | None:
    """What to evict next from a table of ``count`` rows and ``size`` bytes past its
    ``bounds``: (owner, rows, bytes) to free from that owner's oldest, or None when both bounds
    hold. ``top`` is the two owners holding the most: by number when the count bound is passed,
    else by bytes. It frees what is over the bound, but no more than brings the largest holder
    down to the next one (at least one row): the next call then weighs them again."""
    if not top:  # only the newest row, which fits alone
        return None
    if count > bounds[0]:
        largest, runner = top[0], top[1].count if len(top) > 1 else 0
        return largest.owner, min(count - bounds[0], max(1, largest.count - runner)), 0
    if size > bounds[1]:
        largest, runner = top[0], top[1].bytes if len(top) > 1 else 0
        return largest.owner, 1, min(size - bounds[1], max(1, largest.bytes - runner))
    return None


def evict_fairly(
    count: int,
    size: int,
    bounds: tuple[int, int],
    holders: Callable[[bool], Sequence[Holder]],
    evict: Callable[[str, int, int], tuple[int, int]],
) -> int:
    """Evict until the table's ``bounds`` hold (:func:`fair_share`); ``holders(by_bytes)``
    gives the two largest holders, ``evict(owner, rows, bytes)`` drops that owner's oldest rows
    until both are freed (the newest row never) and answers (rows, bytes) it dropped. The
    number of rows evicted."""
    evicted = 0
    while (share := fair_share(count, size, bounds, holders(count <= bounds[0]))) is not None:
        rows, freed = evict(*share)
        if rows == 0:  # nothing left to take but the newest row (which fits)
            break
        evicted, count, size = evicted + rows, count - rows, size - freed
    return evicted


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
