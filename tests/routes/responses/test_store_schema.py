"""The stored responses' layouts are versioned: a SQLite file made before versions (and owners)
is migrated and keeps its rows, replicas that start at once on one new PostgreSQL database
migrate it once, a version newer than the server knows stops it with a clear message, and a
database out of reach is a clear error (at start-up, and later as 503s and a missing gauge)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from backends.errors import StartupError
from bench.harness.server import free_port
from config.settings import ServerSettings
from routes.responses import postgres_store
from routes.responses.postgres_store import PostgresStore
from routes.responses.sqlite_store import MIGRATIONS, SqliteStore
from routes.responses.state import open_store
from routes.responses.store import (
    StoredResponse,
    StoreLimits,
    StoreUnavailable,
    UnknownSchema,
    owner_hash,
)
from tests.postgres import PostgresServer

LIMITS = StoreLimits(100, 1 << 20, 60.0)
# The table as the server made it before its layout had versions (commit 2e1ce19).
BEFORE_VERSIONS = """
CREATE TABLE responses (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, expires REAL NOT NULL,
    bytes INTEGER NOT NULL, body TEXT NOT NULL
);
CREATE INDEX responses_expiry ON responses (expires);
CREATE TABLE totals (one INTEGER PRIMARY KEY CHECK (one = 1), count INTEGER NOT NULL,
    bytes INTEGER NOT NULL);
INSERT INTO totals VALUES (1, 1, 41);
CREATE TRIGGER responses_added AFTER INSERT ON responses BEGIN
    UPDATE totals SET count = count + 1, bytes = bytes + NEW.bytes;
END;
CREATE TRIGGER responses_removed AFTER DELETE ON responses BEGIN
    UPDATE totals SET count = count - 1, bytes = bytes - OLD.bytes;
END;
"""
OLD_BODY = '{"response": {"output": []}, "input": []}'  # 41 bytes
# What version 4 added (each owner's count and bytes), dropped to make a table of version 3.
SQLITE_VERSION_4 = (
    "DROP TRIGGER owners_added",
    "DROP TRIGGER owners_removed",
    "DROP INDEX responses_owner",
    "DROP TABLE owners",
)
POSTGRES_VERSION_3 = (
    "DROP TABLE genai_responses_owners",
    "DROP TRIGGER genai_responses_owners_added ON genai_responses",
    "DROP TRIGGER genai_responses_owners_removed ON genai_responses",
    "DROP FUNCTION genai_responses_owners_added, genai_responses_owners_removed",
    "DROP INDEX genai_responses_owner",
)


@pytest.mark.unit
def test_a_file_from_before_versions_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    with sqlite3.connect(path) as db:
        db.executescript(BEFORE_VERSIONS)
        db.execute("INSERT INTO responses VALUES (1, 'resp_old', 9e12, 41, ?)", (OLD_BODY,))
        db.execute("UPDATE totals SET count = 1, bytes = 41")  # the trigger counted it again
    s = SqliteStore(path, LIMITS)
    assert s.get("resp_old") == StoredResponse("resp_old", {"output": []}, [])
    assert s.get("resp_old", "sha256:aa") is None, "a row from before owners has none"
    assert s.usage() == (1, 41)
    assert s.put(StoredResponse("resp_new", {"output": []}, [], owner="sha256:aa"))
    assert s.get("resp_new", "sha256:aa") is not None
    s.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)


@pytest.mark.unit
def test_owners_stored_before_the_secret_keep_their_rows(tmp_path: Path) -> None:
    """A file at version 2 kept the key's bare hash; version 3 keeps an HMAC of it under the
    table's secret, and the key still reaches its row."""
    path = tmp_path / "responses.db"
    SqliteStore(path, LIMITS).close()
    with sqlite3.connect(path) as db:
        for statement in (*SQLITE_VERSION_4, "DROP TABLE secret"):
            db.execute(statement)
        db.execute("PRAGMA user_version = 2")
        db.execute(
            "INSERT INTO responses (id, owner, expires, bytes, body) VALUES (?, ?, 9e12, 41, ?)",
            ("resp_old", "sha256:aa", OLD_BODY),
        )
    s = SqliteStore(path, LIMITS)
    assert s.get("resp_old", "sha256:aa") == StoredResponse(
        "resp_old", {"output": []}, [], owner="sha256:aa"
    )
    assert s.get("resp_old", "sha256:bb") is None and s.get("resp_old") is None
    s.close()
    with sqlite3.connect(path) as db:
        [(owner,)] = db.execute("SELECT owner FROM responses").fetchall()
        [(secret,)] = db.execute("SELECT key FROM secret").fetchall()
    assert owner == owner_hash(bytes.fromhex(secret), "sha256:aa") != "sha256:aa"


@pytest.mark.live
def test_owners_stored_before_the_secret_keep_their_rows_in_postgres(
    postgres: PostgresServer,
) -> None:
    url = postgres.new_database()
    PostgresStore(url, LIMITS).close()
    for statement in (
        *POSTGRES_VERSION_3,
        "DROP TABLE genai_responses_secret",
        "UPDATE genai_responses_schema SET version = 1",
        "INSERT INTO genai_responses (id, owner, expires, bytes, body)"
        " VALUES ('resp_old', 'sha256:aa', 9e12, 41, '" + OLD_BODY + "')",
    ):
        postgres.sql(url, statement)
    s = PostgresStore(url, LIMITS)
    assert s.get("resp_old", "sha256:aa") is not None
    assert s.get("resp_old", "sha256:bb") is None
    s.close()
    [(owner,)] = postgres.sql(url, "SELECT owner FROM genai_responses")
    assert owner.startswith("hmac-sha256:")
    # Another replica on the table reads the same secret.
    assert PostgresStore(url, LIMITS).get("resp_old", "sha256:aa") is not None


KEYED = StoreLimits(100, 1 << 20, 60.0, key_responses=2)


@pytest.mark.unit
def test_owners_stored_before_quotas_are_counted(tmp_path: Path) -> None:
    """A file at version 3 had no count per owner; version 4 counts the rows already stored,
    so their key's quota applies to them at once (and only to them)."""
    path = tmp_path / "responses.db"
    s = SqliteStore(path, KEYED)
    for n, owner in enumerate(["sha256:aa"] * 2 + ["sha256:bb", None]):
        s.put(StoredResponse(f"resp_{n}", {"output": []}, [], owner=owner))
    s.close()
    with sqlite3.connect(path) as db:
        for statement in SQLITE_VERSION_4:
            db.execute(statement)
        db.execute("PRAGMA user_version = 3")
    s = SqliteStore(path, KEYED)
    assert s.keys() == (2, 1)
    s.put(StoredResponse("resp_9", {"output": []}, [], owner="sha256:aa"))
    assert s.get("resp_0", "sha256:aa") is None, "its oldest went for its quota"
    assert all(s.get(f"resp_{n}", o) for n, o in ((1, "sha256:aa"), (2, "sha256:bb"), (3, None)))
    s.close()


@pytest.mark.live
def test_owners_stored_before_quotas_are_counted_in_postgres(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    s = PostgresStore(url, KEYED)
    for n, owner in enumerate(["sha256:aa"] * 2 + ["sha256:bb", None]):
        s.put(StoredResponse(f"resp_{n}", {"output": []}, [], owner=owner))
    s.close()
    for statement in (*POSTGRES_VERSION_3, "UPDATE genai_responses_schema SET version = 2"):
        postgres.sql(url, statement)
    s = PostgresStore(url, KEYED)
    assert s.keys() == (2, 1)
    s.put(StoredResponse("resp_9", {"output": []}, [], owner="sha256:aa"))
    assert s.get("resp_0", "sha256:aa") is None, "its oldest went for its quota"
    assert all(s.get(f"resp_{n}", o) for n, o in ((1, "sha256:aa"), (2, "sha256:bb"), (3, None)))
    s.close()


@pytest.mark.unit
def test_the_file_is_its_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    s = SqliteStore(path, LIMITS)
    s.put(StoredResponse("resp_a", {"output": []}, []))
    modes = {f.name: oct(f.stat().st_mode & 0o777) for f in tmp_path.iterdir()}
    s.close()
    assert modes["responses.db"] == "0o600" and modes["responses.db-wal"] == "0o600", modes
    path.chmod(0o644)  # a file from before
    SqliteStore(path, LIMITS).close()
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.unit
def test_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "responses.db"
    SqliteStore(path, LIMITS).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 7")
    with pytest.raises(UnknownSchema) as refused:
        SqliteStore(path, LIMITS)
    message = str(refused.value)
    assert "schema version 7" in message and f"up to {len(MIGRATIONS)}" in message
    assert str(path) in message


@pytest.mark.unit
def test_an_unreachable_database_stops_the_start_without_its_password() -> None:
    url = f"postgresql://genai:hunter2@127.0.0.1:{free_port()}/responses"
    with pytest.raises(StartupError) as refused:
        open_store(ServerSettings(responses_db=url))
    message = str(refused.value)
    assert message.startswith("Cannot open GENAI_RESPONSES_DB=postgresql://genai@127.0.0.1:")
    assert "hunter2" not in message
    assert "refused" in message.lower()


@pytest.mark.live
def test_a_newer_database_is_refused(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    PostgresStore(url, LIMITS).close()
    postgres.sql(url, "UPDATE genai_responses_schema SET version = 9")
    with pytest.raises(StartupError) as refused:
        open_store(ServerSettings(responses_db=url))
    message = str(refused.value)
    assert "schema version 9" in message
    assert f"up to {len(postgres_store.MIGRATIONS)}" in message
    assert "GENAI_RESPONSES_DB=postgresql://genai@127.0.0.1:" in message


@pytest.mark.live
def test_replicas_starting_at_once_migrate_once(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    opened: list[PostgresStore] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(PostgresStore(url, LIMITS))
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    newest = len(postgres_store.MIGRATIONS)
    assert postgres.sql(url, "SELECT version FROM genai_responses_schema") == [(newest,)]
    assert opened[0].put(StoredResponse("resp_1", {"output": []}, []))
    assert all(s.get("resp_1") is not None for s in opened)
    for s in opened:
        s.close()


@pytest.mark.live
def test_a_database_gone_is_a_503_and_no_gauge(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    s = PostgresStore(url, LIMITS, timeout=1.0)
    assert s.put(StoredResponse("resp_1", {"output": []}, []))
    name = url.rsplit("/", 1)[1]
    postgres.sql(postgres.url(), f"DROP DATABASE {name} WITH (FORCE)")
    with pytest.raises(StoreUnavailable) as gone:
        s.get("resp_1")
    assert gone.value.status_code == 503
    with pytest.raises(StoreUnavailable):
        s.put(StoredResponse("resp_2", {"output": []}, []))
    assert s.usage() is None
    s.close()
