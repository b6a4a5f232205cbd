"""Stored responses (``store: true``): a bounded table of response objects, kept for
``previous_response_id``, ``GET /v1/responses/{id}``, its ``input_items`` and ``DELETE``.

One SQLite table, in memory by default or in a file (GENAI_RESPONSES_DB) that outlives the
process and that several processes may share. It is bounded three ways: a number of responses,
a number of bytes (their JSON), and a time to live from when each was stored. Past a bound the
oldest go first; an expired one is gone for every reader at once.

Each row is self-contained: a response's input items are the whole conversation before its
output (the chain it continued included), so evicting or deleting an earlier link never breaks
a later one. The price is that a long chain stores its early items again in every link; the
byte bound keeps that in check.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("genai.responses")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order they were stored in
    id TEXT NOT NULL UNIQUE,
    expires REAL NOT NULL,                  -- seconds since the epoch
    bytes INTEGER NOT NULL,
    body TEXT NOT NULL                      -- {"response": ..., "input": [...]}
)
"""
# Past either bound, the oldest go: every row after the newest that fit.
_EVICT = """
DELETE FROM responses WHERE seq IN (
    SELECT seq FROM (
        SELECT seq, ROW_NUMBER() OVER newest AS n, SUM(bytes) OVER newest AS total
        FROM responses WINDOW newest AS (ORDER BY seq DESC)
    ) WHERE n > ? OR total > ?
)
"""


@dataclass(frozen=True)
class StoredResponse:
    """A response as its client got it (the JSON of the response object), and the input items
    it answered: the whole conversation before its output, each item with its ``id``."""

    id: str
    response: dict[str, Any]
    input: list[dict[str, Any]]

    def conversation(self) -> list[dict[str, Any]]:
        """What a response that continues this one starts from: its input, then its output."""
        return [*self.input, *self.response["output"]]


@dataclass(frozen=True)
class StoreLimits:
    max_responses: int
    max_bytes: int
    ttl: float  # seconds


class ResponseStore:
    """The table; every method is a short blocking call (run it off the event loop), safe
    from any thread. ``clock`` gives seconds since the epoch (a file outlives the process,
    so its expiry times must be wall-clock times)."""

    def __init__(
        self,
        path: Path | None,
        limits: StoreLimits,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit; each change is one explicit transaction. A file waits for another
        # process's write (WAL: readers never wait).
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path),
            timeout=10.0,
            isolation_level=None,
            check_same_thread=False,
        )
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def put(self, stored: StoredResponse) -> bool:
        """Keep ``stored`` (evicting the oldest past a bound); False when it alone is larger
        than the byte bound, and so is not kept."""
        body = json.dumps({"response": stored.response, "input": stored.input})
        size = len(body.encode())
        if size > self.limits.max_bytes:
            log.warning(
                "response %s not stored: its %d bytes exceed GENAI_RESPONSES_MAX_MIB",
                stored.id,
                size,
            )
            return False
        now = self._clock()
        with self._lock:
            self._write(
                ("DELETE FROM responses WHERE expires <= ?", (now,)),
                (
                    "INSERT OR REPLACE INTO responses (id, expires, bytes, body) "
                    "VALUES (?, ?, ?, ?)",
                    (stored.id, now + self.limits.ttl, size, body),
                ),
                (_EVICT, (self.limits.max_responses, self.limits.max_bytes)),
            )
        return True

    def get(self, response_id: str) -> StoredResponse | None:
        """The response, unless it is unknown, expired or deleted."""
        with self._lock:
            row = self._db.execute(
                "SELECT body FROM responses WHERE id = ? AND expires > ?",
                (response_id, self._clock()),
            ).fetchone()
        if row is None:
            return None
        body = json.loads(row[0])
        return StoredResponse(response_id, body["response"], body["input"])

    def delete(self, response_id: str) -> bool:
        """Forget the response; False when there was none to forget (unknown or expired)."""
        with self._lock:
            cursor = self._write(
                ("DELETE FROM responses WHERE id = ? AND expires > ?", (response_id, self._clock()))
            )
        return cursor.rowcount > 0

    def usage(self) -> tuple[int, int]:
        """(responses, bytes) held, expired ones included until the next write."""
        with self._lock:
            count, size = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses"
            ).fetchone()
        return int(count), int(size)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, *statements: tuple[str, tuple[Any, ...]]) -> sqlite3.Cursor:
        """The statements in one transaction; the last one's cursor."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for sql, args in statements:
                cursor = db.execute(sql, args)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return cursor
