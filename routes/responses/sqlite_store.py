"""The stored responses in SQLite (routes/responses/store.py says what a store keeps): in memory
by default, or in a file (GENAI_RESPONSES_DB) that outlives the process and that several
processes of one host may share (WAL mode needs a local disk, not a network file system).

Its layout is versioned by SQLite's ``user_version``: version 1 is the table as it was before
versions were counted (a file made then reads as 0 and its tables are kept), version 2 adds
each row's owner (the rows already stored have none: only a server without keys sees them),
version 3 the owner secret (the owners already stored are hashed under it, so their keys keep
them), version 4 each owner's count and bytes (kept by triggers, for the keys' quotas) and an
index of each owner's rows, oldest first (a row's owner is never changed after it). The file
(and its WAL files, which SQLite makes with the file's mode) is its owner's alone (0600): it
holds every key's prompts.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from routes.responses.store import (
    EXPIRED,
    FULL_BYTES,
    OVER_KEY_LIMIT,
    OVER_LIMIT,
    Evictions,
    Holder,
    StoreCalls,
    StoredResponse,
    StoreLimits,
    StoreUnavailable,
    decode,
    encode,
    evict_fairly,
    migrate,
    new_secret,
    oldest_to_free,
    owner_hash,
    too_large,
)

log = logging.getLogger("genai.responses")


Step = str | Callable[[sqlite3.Connection], None]  # a statement, or a function of the table
MIGRATIONS: tuple[tuple[Step, ...], ...] = (
    (
        """CREATE TABLE IF NOT EXISTS responses (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order they were stored in
            id TEXT NOT NULL UNIQUE,
            expires REAL NOT NULL,                  -- seconds since the epoch
            bytes INTEGER NOT NULL,
            body TEXT NOT NULL                      -- {"response", "input", "transcript"}
        )""",
        "CREATE INDEX IF NOT EXISTS responses_expiry ON responses (expires)",
        # The table's count and bytes, kept by triggers: a write never scans the table.
        """CREATE TABLE IF NOT EXISTS totals (
            one INTEGER PRIMARY KEY CHECK (one = 1),
            count INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        )""",
        "INSERT OR IGNORE INTO totals SELECT 1, COUNT(*), COALESCE(SUM(bytes), 0) FROM responses",
        """CREATE TRIGGER IF NOT EXISTS responses_added AFTER INSERT ON responses BEGIN
            UPDATE totals SET count = count + 1, bytes = bytes + NEW.bytes;
        END""",
        """CREATE TRIGGER IF NOT EXISTS responses_removed AFTER DELETE ON responses BEGIN
            UPDATE totals SET count = count - 1, bytes = bytes - OLD.bytes;
        END""",
    ),
    ("ALTER TABLE responses ADD COLUMN owner TEXT",),  # the hash of the key that made it
    (
        "CREATE TABLE secret (one INTEGER PRIMARY KEY CHECK (one = 1), key TEXT NOT NULL)",
        lambda db: _owners_under_a_secret(db),  # (defined below)
    ),
    (
        # Each owner's count and bytes ('' for rows without one), kept by triggers: a key's
        # quota and the largest holder are read without scanning the rows.
        """CREATE TABLE owners (
            owner TEXT NOT NULL PRIMARY KEY,
            count INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        )""",
        """INSERT INTO owners
            SELECT COALESCE(owner, ''), COUNT(*), SUM(bytes) FROM responses GROUP BY 1""",
        "CREATE INDEX responses_owner ON responses (owner, seq)",  # an owner's, oldest first
        """CREATE TRIGGER owners_added AFTER INSERT ON responses BEGIN
            INSERT INTO owners VALUES (COALESCE(NEW.owner, ''), 1, NEW.bytes)
                ON CONFLICT (owner) DO UPDATE
                SET count = count + 1, bytes = bytes + excluded.bytes;
        END""",
        """CREATE TRIGGER owners_removed AFTER DELETE ON responses BEGIN
            UPDATE owners SET count = count - 1, bytes = bytes - OLD.bytes
                WHERE owner = COALESCE(OLD.owner, '');
            DELETE FROM owners WHERE owner = COALESCE(OLD.owner, '') AND count = 0;
        END""",
    ),
)


def _owners_under_a_secret(db: sqlite3.Connection) -> None:
    """Make the table's secret, and keep the owners already stored as its HMAC of them."""
    secret = new_secret()
    db.execute("INSERT INTO secret VALUES (1, ?)", (secret,))
    rows = db.execute("SELECT seq, owner FROM responses WHERE owner IS NOT NULL").fetchall()
    hashed = [(owner_hash(bytes.fromhex(secret), owner), seq) for seq, owner in rows]
    db.executemany("UPDATE responses SET owner = ? WHERE seq = ?", hashed)


class SqliteStore:
    """The table; every method is a short blocking call (run it off the event loop), safe
    from any thread. ``clock`` gives seconds since the epoch (a file outlives the process,
    so its expiry times must be wall-clock times)."""

    def __init__(
        self,
        path: Path | None,
        limits: StoreLimits,
        clock: Callable[[], float] = time.time,
        *,
        timeout: float = 3.0,
    ) -> None:
        self.path = path
        self.limits = limits
        self.evictions = Evictions()
        self._clock = clock
        self._lock = threading.Lock()
        self.calls = StoreCalls(2, timeout)  # one connection: more threads would only wait
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            _owners_only(path)
        # Autocommit; each change is one explicit transaction. A file waits for another
        # process's write (WAL: readers never wait).
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path),
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        if path is not None:
            # WAL: readers never wait for a writer. NORMAL: a write is not synced to the disk
            # at each commit (a power cut may lose the last few; the file stays whole).
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        with self._transaction() as db:  # one process migrates; the others wait, then see it
            (version,) = db.execute("PRAGMA user_version").fetchone()
            where = f"GENAI_RESPONSES_DB={path}" if path else "the in-memory store"
            migrate(
                where,
                version,
                MIGRATIONS,
                lambda step: step(db) if callable(step) else db.execute(step),
                lambda v: db.execute(f"PRAGMA user_version = {int(v)}"),
            )
            (secret,) = db.execute("SELECT key FROM secret").fetchone()
        self._secret = bytes.fromhex(secret)

    def put(self, stored: StoredResponse) -> bool:
        body, size = encode(stored)
        limits = self.limits
        if too_large(stored, size, limits):
            return False
        now, owner = self._clock(), self._owner(stored.owner)
        with self._transaction() as db:
            expired = db.execute("DELETE FROM responses WHERE expires <= ?", (now,)).rowcount
            # (Not INSERT OR REPLACE: a replaced row would not fire the delete trigger.)
            db.execute("DELETE FROM responses WHERE id = ?", (stored.id,))
            new = db.execute(
                "INSERT INTO responses (id, owner, expires, bytes, body) VALUES (?, ?, ?, ?, ?)",
                (stored.id, owner, now + limits.ttl, size, body),
            ).lastrowid
            assert new is not None
            key_evicted = 0
            if owner is not None:  # its key's quota first: only its own oldest go
                count, total = db.execute(
                    "SELECT count, bytes FROM owners WHERE owner = ?", (owner,)
                ).fetchone()
                most = limits.per_key
                if count > most[0] or total > most[1]:
                    over = (max(0, count - most[0]), max(0, total - most[1]))
                    key_evicted = _evict(db, owner, *over, new)[0]
            count, total = db.execute("SELECT count, bytes FROM totals").fetchone()
            evicted = evict_fairly(
                count,
                total,
                limits.table,
                lambda by_bytes: _holders(db, owner or "", size, by_bytes),
                lambda victim, rows, bytes_: _evict(db, victim, rows, bytes_, new),
            )
        self.evictions.add(EXPIRED, expired)
        self.evictions.add(OVER_KEY_LIMIT, key_evicted)
        self.evictions.add(OVER_LIMIT, evicted)
        return True

    def get(self, response_id: str, owner: str | None = None) -> StoredResponse | None:
        with self._lock, _unavailable():
            row = self._db.execute(
                "SELECT body FROM responses WHERE id = ? AND owner IS ? AND expires > ?",
                (response_id, self._owner(owner), self._clock()),
            ).fetchone()
        return None if row is None else decode(response_id, row[0], owner)

    def delete(self, response_id: str, owner: str | None = None) -> bool:
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM responses WHERE id = ? AND owner IS ? AND expires > ?",
                (response_id, self._owner(owner), self._clock()),
            )
            return cursor.rowcount > 0

    def usage(self) -> tuple[int, int] | None:
        try:
            with self._lock:
                count, size = self._db.execute("SELECT count, bytes FROM totals").fetchone()
        except sqlite3.Error:
            return None
        return int(count), int(size)

    def keys(self) -> tuple[int, int] | None:
        most, size = self.limits.per_key
        try:
            with self._lock:
                keys, full = self._db.execute(
                    "SELECT COUNT(*), COALESCE(SUM(count >= ? OR bytes >= ?), 0)"
                    " FROM owners WHERE owner <> ''",
                    (most, FULL_BYTES * size),
                ).fetchone()
        except sqlite3.Error:
            return None
        return int(keys), int(full)

    def _owner(self, owner: str | None) -> str | None:
        return owner_hash(self._secret, owner)

    def close(self) -> None:
        self.calls.close()
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, under the lock (a file's other processes wait for it)."""
        with self._lock, _unavailable():
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")


def _holders(db: sqlite3.Connection, new: str, size: int, by_bytes: bool) -> list[Holder]:
    """The two owners holding the most (by number, or by bytes), the newest row (``new``'s,
    ``size`` bytes) left out."""
    order = "b DESC, n DESC" if by_bytes else "n DESC, b DESC"
    rows = db.execute(
        f"""SELECT owner, n, b FROM (
            SELECT owner, count - (owner = :new) AS n, bytes - (owner = :new) * :size AS b
            FROM owners
        ) WHERE n > 0 ORDER BY {order}, owner LIMIT 2""",
        {"new": new, "size": size},
    ).fetchall()
    return [Holder(*row) for row in rows]


def _evict(
    db: sqlite3.Connection, owner: str, rows: int, size: int, before: int
) -> tuple[int, int]:
    """Drop ``owner``'s oldest rows ('' : those without one) stored before ``before`` until
    ``rows`` rows and ``size`` bytes are freed; (rows, bytes) dropped."""
    match, args = ("owner IS NULL", ()) if owner == "" else ("owner = ?", (owner,))
    oldest = db.execute(
        f"SELECT seq, bytes FROM responses WHERE {match} AND seq < ? ORDER BY seq",
        (*args, before),
    )
    last, freed_rows, freed = oldest_to_free(rows, size, oldest)
    oldest.close()
    if last is None:
        return 0, 0
    db.execute(f"DELETE FROM responses WHERE {match} AND seq <= ?", (*args, last))
    return freed_rows, freed


def _owners_only(path: Path) -> None:
    """The file and its WAL files readable by their owner alone (0600): made so, or made so
    now (a file from before); a file another user owns is left as it is, saying so."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if stat.S_IMODE(file.stat().st_mode) & 0o077:
                file.chmod(0o600)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("%s stays readable by others (%s): it holds every key's prompts", file, exc)


@contextmanager
def _unavailable() -> Iterator[None]:
    """A file locked past the timeout, or unreadable, is the store being unavailable."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        raise StoreUnavailable(f"The stored responses cannot be read now: {exc}.") from None
