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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    body TEXT NOT NULL                      -- {"response": ..., "input": [...], "transcript"}
);
CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires);
-- The table's count and bytes, kept by triggers: a write never scans the table.
CREATE TABLE IF NOT EXISTS totals (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    count INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals SELECT 1, COUNT(*), COALESCE(SUM(bytes), 0) FROM responses;
CREATE TRIGGER IF NOT EXISTS responses_added AFTER INSERT ON responses BEGIN
    UPDATE totals SET count = count + 1, bytes = bytes + NEW.bytes;
END;
CREATE TRIGGER IF NOT EXISTS responses_removed AFTER DELETE ON responses BEGIN
    UPDATE totals SET count = count - 1, bytes = bytes - OLD.bytes;
END;
"""


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
            # WAL: readers never wait for a writer. NORMAL: a write is not synced to the disk
            # at each commit (a power cut may lose the last few; the file stays whole).
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def put(self, stored: StoredResponse) -> bool:
        """Keep ``stored`` (evicting the oldest past a bound); False when it alone is larger
        than the byte bound, and so is not kept."""
        kept: dict[str, Any] = {"response": stored.response, "input": stored.input}
        if stored.transcript is not None:
            kept["transcript"] = stored.transcript
        body = json.dumps(kept)
        size = len(body.encode())
        limits = self.limits
        if size > limits.max_bytes:
            log.warning(
                "response %s not stored: its %d bytes exceed GENAI_RESPONSES_MAX_MIB",
                stored.id,
                size,
            )
            return False
        now = self._clock()
        with self._transaction() as db:
            db.execute("DELETE FROM responses WHERE expires <= ?", (now,))
            # (Not INSERT OR REPLACE: a replaced row would not fire the delete trigger.)
            db.execute("DELETE FROM responses WHERE id = ?", (stored.id,))
            db.execute(
                "INSERT INTO responses (id, expires, bytes, body) VALUES (?, ?, ?, ?)",
                (stored.id, now + limits.ttl, size, body),
            )
            count, total = db.execute("SELECT count, bytes FROM totals").fetchone()
            if count <= limits.max_responses and total <= limits.max_bytes:
                return True
            # The oldest go until both bounds hold (the newest, just stored, always fits).
            last, oldest = None, db.execute("SELECT seq, bytes FROM responses ORDER BY seq")
            for seq, bytes_ in oldest:
                if count <= limits.max_responses and total <= limits.max_bytes:
                    break
                last, count, total = seq, count - 1, total - bytes_
            oldest.close()
            db.execute("DELETE FROM responses WHERE seq <= ?", (last,))
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
        return StoredResponse(response_id, body["response"], body["input"], body.get("transcript"))

    def delete(self, response_id: str) -> bool:
        """Forget the response; False when there was none to forget (unknown or expired)."""
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM responses WHERE id = ? AND expires > ?", (response_id, self._clock())
            )
            return cursor.rowcount > 0

    def usage(self) -> tuple[int, int]:
        """(responses, bytes) held, expired ones included until the next write."""
        with self._lock:
            count, size = self._db.execute("SELECT count, bytes FROM totals").fetchone()
        return int(count), int(size)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, under the lock (a file's other processes wait for it)."""
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
