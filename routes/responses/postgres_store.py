"""The stored responses in PostgreSQL (``GENAI_RESPONSES_DB=postgresql://…``), through psycopg 3
and its connection pool: one table that every replica reads and writes, so a chain, a GET, a
DELETE or an input_items call may land on any of them (routes/responses/store.py says what a
store keeps).

The same layout as the SQLite table, its names prefixed ``genai_`` (a database may hold other
things): the rows, their totals and each owner's count and bytes kept by statement triggers,
each row's owner (never changed once stored), an index of each owner's rows. Every write takes
the totals row's lock first, so writes from all replicas queue in one order and no eviction is
raced (nor deadlocked). Expiry times are the replicas' wall-clock times:
keep their clocks in step (NTP), as any TTL across hosts needs.

The layout is versioned in ``genai_responses_schema``; the first replica to start migrates it,
under an advisory lock, while the others wait; a version newer than this server knows stops it
at start-up.

A database that hangs or dies must cost its callers a 503 within ``timeout`` seconds, never
more, and never a thread held for good: each connection has a statement (and lock) timeout, TCP
keepalives and a user timeout (a host that vanished), a connect timeout; a connection still
busy a second past ``timeout`` (a server that stopped answering: ``kill -STOP``, whose kernel
still acknowledges every packet) has its socket shut down, which ends the call at once. The
pool gives up reconnecting after ``timeout`` and starts again at the next call, so a database
that comes back is used within a second or two, not after a long backoff.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

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
    owner_hash,
    too_large,
)

log = logging.getLogger("genai.responses")

SCHEMES = ("postgresql://", "postgres://")
_MIGRATION_LOCK = 0x67656E6169  # pg_advisory_xact_lock's key for the migration ("genai")
Step = str | Callable[[Connection[Any]], None]  # a statement, or a function of the database
MIGRATIONS: tuple[tuple[Step, ...], ...] = (
    (
        """CREATE TABLE genai_responses (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- the order they were stored in
            id TEXT NOT NULL UNIQUE,
            owner TEXT,                         -- the hash of the key that made it
            expires DOUBLE PRECISION NOT NULL,  -- seconds since the epoch
            bytes BIGINT NOT NULL,
            body TEXT NOT NULL                  -- {"response", "input", "transcript"}, as sent
        )""",
        "CREATE INDEX genai_responses_expiry ON genai_responses (expires)",
        """CREATE TABLE genai_responses_totals (
            one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
            count BIGINT NOT NULL,
            bytes BIGINT NOT NULL
        )""",
        "INSERT INTO genai_responses_totals VALUES (TRUE, 0, 0)",
        """CREATE FUNCTION genai_responses_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE genai_responses_totals SET count = count + (SELECT COUNT(*) FROM added),
                bytes = bytes + (SELECT COALESCE(SUM(bytes), 0) FROM added);
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION genai_responses_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE genai_responses_totals SET count = count - (SELECT COUNT(*) FROM removed),
                bytes = bytes - (SELECT COALESCE(SUM(bytes), 0) FROM removed);
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER genai_responses_added AFTER INSERT ON genai_responses
            REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION genai_responses_added()""",
        """CREATE TRIGGER genai_responses_removed AFTER DELETE ON genai_responses
            REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION genai_responses_removed()""",
    ),
    (
        """CREATE TABLE genai_responses_secret (
            one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
            key TEXT NOT NULL                   -- hex: the owners are HMACs under it
        )""",
        lambda db: _owners_under_a_secret(db),  # (defined below)
    ),
    (
        # Each owner's count and bytes ('' for rows without one), kept by triggers: a key's
        # quota and the largest holder are read without scanning the rows.
        """CREATE TABLE genai_responses_owners (
            owner TEXT PRIMARY KEY,
            count BIGINT NOT NULL,
            bytes BIGINT NOT NULL
        )""",
        """INSERT INTO genai_responses_owners
            SELECT COALESCE(owner, ''), COUNT(*), SUM(bytes) FROM genai_responses GROUP BY 1""",
        "CREATE INDEX genai_responses_owner ON genai_responses (owner, seq)",
        """CREATE FUNCTION genai_responses_owners_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO genai_responses_owners AS o
                SELECT COALESCE(owner, ''), COUNT(*), SUM(bytes) FROM added GROUP BY 1
                ON CONFLICT (owner) DO UPDATE
                SET count = o.count + excluded.count, bytes = o.bytes + excluded.bytes;
            RETURN NULL;
        END $$""",
        """CREATE FUNCTION genai_responses_owners_removed() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE genai_responses_owners o
                SET count = o.count - r.count, bytes = o.bytes - r.bytes
                FROM (SELECT COALESCE(owner, '') AS owner, COUNT(*) AS count,
                    SUM(bytes) AS bytes FROM removed GROUP BY 1) r
                WHERE o.owner = r.owner;
            DELETE FROM genai_responses_owners
                WHERE count = 0 AND owner IN (SELECT COALESCE(owner, '') FROM removed);
            RETURN NULL;
        END $$""",
        """CREATE TRIGGER genai_responses_owners_added AFTER INSERT ON genai_responses
            REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION genai_responses_owners_added()""",
        """CREATE TRIGGER genai_responses_owners_removed AFTER DELETE ON genai_responses
            REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION genai_responses_owners_removed()""",
    ),
)


def _owners_under_a_secret(db: Connection[Any]) -> None:
    """Make the table's secret, and keep the owners already stored as its HMAC of them."""
    secret = new_secret()
    db.execute("INSERT INTO genai_responses_secret VALUES (TRUE, %s)", (secret,))
    rows = db.execute("SELECT seq, owner FROM genai_responses WHERE owner IS NOT NULL").fetchall()
    hashed = [(owner_hash(bytes.fromhex(secret), owner), seq) for seq, owner in rows]
    db.cursor().executemany("UPDATE genai_responses SET owner = %s WHERE seq = %s", hashed)


# One owner's oldest rows to drop (``{match}``: ``owner = %(owner)s``, or ``owner IS NULL``),
# stored before the newest: those up to the first whose running count and bytes reach what is
# to be freed (read through the owner's index: that owner's rows alone, its quota at most).
_EVICT = """
DELETE FROM genai_responses WHERE {match} AND seq <= (
    SELECT seq FROM (
        SELECT seq, ROW_NUMBER() OVER w AS n, SUM(bytes) OVER w AS freed
        FROM genai_responses WHERE {match} AND seq < %(before)s WINDOW w AS (ORDER BY seq)
    ) oldest
    WHERE n >= %(rows)s AND freed >= %(bytes)s ORDER BY seq LIMIT 1
) RETURNING bytes"""
# The two owners holding the most (``{order}``: by number, or by bytes), the newest row left out.
_HOLDERS = """
SELECT owner, n, b FROM (
    SELECT owner, count - CASE WHEN owner = %(new)s THEN 1 ELSE 0 END AS n,
        bytes - CASE WHEN owner = %(new)s THEN %(size)s ELSE 0 END AS b
    FROM genai_responses_owners
) held WHERE n > 0 ORDER BY {order}, owner LIMIT 2"""
_OWNED = "id = %s AND owner IS NOT DISTINCT FROM %s AND expires > %s"


def is_url(location: str) -> bool:
    return location.startswith(SCHEMES)


def describe(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(an unreadable URL)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host, port = parts.get("host", ""), f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname', '')}"


class PostgresStore:
    """The table, through a small pool of connections; every method is a short blocking call
    (run it off the event loop), safe from any thread."""

    def __init__(
        self,
        url: str,
        limits: StoreLimits,
        clock: Callable[[], float] = time.time,
        *,
        timeout: float = 3.0,
        pool_size: int = 4,
    ) -> None:
        self.where = f"GENAI_RESPONSES_DB={describe(url)}"
        self.limits = limits
        self.evictions = Evictions()
        self._clock = clock
        self._hang_up_after = timeout + 1.0
        kwargs = connection_options(timeout)
        # One connection first: its failure says why (refused, a password, no database), and
        # the layout is migrated before any request can see it.
        with psycopg.connect(url, **kwargs) as db:
            self._migrate(db)
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=timeout,  # waiting for a free connection
            check=self._check,  # a database restarted: a fresh one
            kwargs=kwargs,
            # Then a new attempt at the next call, not a growing backoff. (No max_waiting:
            # the calls' own bound keeps the queue short, and the pool grows again only for a
            # caller that queued.)
            reconnect_timeout=timeout,
            name="genai-responses",
        )
        self._pool.open(wait=True, timeout=max(timeout, 5.0))
        self.calls = StoreCalls(pool_size, timeout)

    def _migrate(self, db: Connection[Any]) -> None:
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            db.execute(
                "CREATE TABLE IF NOT EXISTS genai_responses_schema (version INTEGER NOT NULL)"
            )
            row = db.execute("SELECT MAX(version) FROM genai_responses_schema").fetchone()

            def set_version(version: int) -> None:
                db.execute("DELETE FROM genai_responses_schema")
                db.execute("INSERT INTO genai_responses_schema VALUES (%s)", (version,))

            def run(step: Step) -> None:
                if callable(step):
                    step(db)
                else:
                    db.execute(step)

            migrate(self.where, (row and row[0]) or 0, MIGRATIONS, run, set_version)
            secret = db.execute("SELECT key FROM genai_responses_secret").fetchone()
        assert secret is not None, "made by the second migration"
        self._secret = bytes.fromhex(secret[0])

    def put(self, stored: StoredResponse) -> bool:
        body, size = encode(stored)
        limits = self.limits
        if too_large(stored, size, limits):
            return False
        now, owner = self._clock(), self._owner(stored.owner)
        with self._connection() as db, db.transaction():
            db.execute("SELECT 1 FROM genai_responses_totals FOR UPDATE")  # writes queue here
            expired = db.execute("DELETE FROM genai_responses WHERE expires <= %s", (now,))
            db.execute("DELETE FROM genai_responses WHERE id = %s", (stored.id,))
            row = db.execute(
                "INSERT INTO genai_responses (id, owner, expires, bytes, body)"
                " VALUES (%s, %s, %s, %s, %s) RETURNING seq",
                (stored.id, owner, now + limits.ttl, size, body),
            ).fetchone()
            assert row is not None
            new = int(row[0])
            key_evicted = 0
            if owner is not None:  # its key's quota first: only its own oldest go
                held = db.execute(
                    "SELECT count, bytes FROM genai_responses_owners WHERE owner = %s", (owner,)
                ).fetchone()
                assert held is not None, "kept by the insert's trigger"
                most = limits.per_key
                if held[0] > most[0] or held[1] > most[1]:
                    over = (max(0, held[0] - most[0]), max(0, held[1] - most[1]))
                    key_evicted = _evict(db, owner, *over, new)[0]
            count, total = _totals(db)
            evicted = evict_fairly(
                count,
                total,
                limits.table,
                lambda by_bytes: _holders(db, owner or "", size, by_bytes),
                lambda victim, rows, bytes_: _evict(db, victim, rows, bytes_, new),
            )
        self.evictions.add(EXPIRED, expired.rowcount)
        self.evictions.add(OVER_KEY_LIMIT, key_evicted)
        self.evictions.add(OVER_LIMIT, evicted)
        return True

    def get(self, response_id: str, owner: str | None = None) -> StoredResponse | None:
        with self._connection() as db:
            row = db.execute(
                f"SELECT body FROM genai_responses WHERE {_OWNED}",
                (response_id, self._owner(owner), self._clock()),
            ).fetchone()
        return None if row is None else decode(response_id, row[0], owner)

    def delete(self, response_id: str, owner: str | None = None) -> bool:
        with self._connection() as db, db.transaction():
            db.execute("SELECT 1 FROM genai_responses_totals FOR UPDATE")
            gone = db.execute(
                f"DELETE FROM genai_responses WHERE {_OWNED}",
                (response_id, self._owner(owner), self._clock()),
            )
            return gone.rowcount > 0

    def usage(self) -> tuple[int, int] | None:
        try:
            with self._connection(timeout=1.0) as db:
                return _totals(db)
        except StoreUnavailable:
            return None

    def keys(self) -> tuple[int, int] | None:
        most, size = self.limits.per_key
        try:
            with self._connection(timeout=1.0) as db:
                row = db.execute(
                    "SELECT COUNT(*), COUNT(*) FILTER (WHERE count >= %s OR bytes >= %s)"
                    " FROM genai_responses_owners WHERE owner <> ''",
                    (most, FULL_BYTES * size),
                ).fetchone()
        except StoreUnavailable:
            return None
        assert row is not None
        return int(row[0]), int(row[1])

    def _owner(self, owner: str | None) -> str | None:
        return owner_hash(self._secret, owner)

    def close(self) -> None:
        self.calls.close()
        self._pool.close()

    def _check(self, db: Connection[Any]) -> None:
        with _hang_up_after(db, self._hang_up_after):
            ConnectionPool.check_connection(db)

    @contextmanager
    def _connection(self, timeout: float | None = None) -> Iterator[Connection[Any]]:
        """A pooled connection; the database out of reach is :class:`StoreUnavailable`."""
        try:
            with self._pool.connection(timeout) as db, _hang_up_after(db, self._hang_up_after):
                yield db
        except (PoolTimeout, psycopg.OperationalError) as exc:
            log.warning("%s: %s", self.where, exc)
            raise StoreUnavailable(
                "The stored responses cannot be reached now (their database); retry later."
            ) from None


def connection_options(timeout: float) -> dict[str, Any]:
    """libpq's options for a connection that never makes a caller wait much past ``timeout``
    seconds: the server ends a statement (or a lock wait) past it, and the session of a client
    that stopped mid-transaction (its row lock would stop every writer); keepalives and a TCP
    user timeout notice a host that is gone; connecting waits ``timeout`` at most (libpq counts
    whole seconds, 2 at least)."""
    ms = max(1, round(timeout * 1000))
    server = (
        f"-c statement_timeout={ms} -c lock_timeout={ms} "
        f"-c idle_in_transaction_session_timeout={4 * ms}"
    )
    return {
        "autocommit": True,
        "connect_timeout": max(2, math.ceil(timeout)),
        "options": server,
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": ms,
    }


@contextmanager
def _hang_up_after(db: Connection[Any], seconds: float) -> Iterator[None]:
    """Shut ``db``'s socket down if it is still in use after ``seconds``: libpq then reads the
    end of the stream and fails the call, where a server that stopped answering (but whose
    kernel still acknowledges) would have held it for good."""
    timer = threading.Timer(seconds, _hang_up, (db,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _hang_up(db: Connection[Any]) -> None:
    try:
        with socket.socket(fileno=os.dup(db.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
        log.warning("a stored responses' call took too long: its connection was hung up")
    except (OSError, psycopg.Error):
        pass  # already closed


def _holders(db: Connection[Any], new: str, size: int, by_bytes: bool) -> list[Holder]:
    order = "b DESC, n DESC" if by_bytes else "n DESC, b DESC"
    rows = db.execute(_HOLDERS.format(order=order), {"new": new, "size": size}).fetchall()
    return [Holder(str(owner), int(n), int(b)) for owner, n, b in rows]


def _evict(db: Connection[Any], owner: str, rows: int, size: int, before: int) -> tuple[int, int]:
    """Drop ``owner``'s oldest rows ('' : those without one) stored before ``before`` until
    ``rows`` rows and ``size`` bytes are freed; (rows, bytes) dropped."""
    match = "owner IS NULL" if owner == "" else "owner = %(owner)s"
    args = {"owner": owner, "before": before, "rows": rows, "bytes": size}
    freed = [int(b) for (b,) in db.execute(_EVICT.format(match=match), args).fetchall()]
    return len(freed), sum(freed)


def _totals(db: Connection[Any]) -> tuple[int, int]:
    row = db.execute("SELECT count, bytes FROM genai_responses_totals").fetchone()
    assert row is not None, "the totals row is made by the first migration"
    return int(row[0]), int(row[1])
