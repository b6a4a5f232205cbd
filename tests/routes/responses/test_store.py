"""The stored responses' tables (routes/responses/store.py), no model, each test on each table:
SQLite in memory and in a file (unit tier), and a real PostgreSQL (live tier: a server process,
tests/postgres.py). What a table keeps, its owners, its time to live on an injected clock, its
bounds (count and bytes, oldest first) and the evictions they count, deletes, and a table that
outlives one store and is shared by two."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from routes.responses.postgres_store import PostgresStore
from routes.responses.sqlite_store import SqliteStore
from routes.responses.store import (
    EXPIRED,
    OVER_LIMIT,
    ResponseStore,
    StoredResponse,
    StoreLimits,
)
from tests.postgres import PostgresServer


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def stored(n: int, text: str = "hi", owner: str | None = None) -> StoredResponse:
    item = {"type": "message", "id": f"msg_{n}", "role": "user", "content": text}
    return StoredResponse(f"resp_{n}", {"id": f"resp_{n}", "output": []}, [item], owner=owner)


@dataclasses.dataclass
class Table:
    """One table (a kind, and where it is); ``open`` gives a store on it, each call another
    store on the same table (as another process or replica would open it)."""

    kind: str
    open: Callable[[StoreLimits, Clock], ResponseStore]
    rows: Callable[[], tuple[int, int]]  # (count, bytes) counted from the rows themselves


def sqlite_rows(s: ResponseStore) -> tuple[int, int]:
    assert isinstance(s, SqliteStore)
    query = "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses"
    count, size = s._db.execute(query).fetchone()
    return int(count), int(size)


def tables(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Table]:
    """The table ``request.param`` names, and every store opened on it closed afterwards."""
    opened: list[ResponseStore] = []

    def keep(s: ResponseStore) -> ResponseStore:
        opened.append(s)
        return s

    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres")
        url = server.new_database()

        def rows() -> tuple[int, int]:
            [(count, size)] = server.sql(
                url, "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM genai_responses"
            )
            return int(count), int(size)

        yield Table("postgres", lambda lim, c: keep(PostgresStore(url, lim, c)), rows)
    else:
        path = tmp_path / "state" / "responses.db" if request.param == "file" else None
        yield Table(
            request.param,
            lambda lim, c: keep(SqliteStore(path, lim, c)),
            lambda: sqlite_rows(opened[0]),
        )
    for s in opened:
        s.close()


MEMORY = pytest.param("memory", marks=pytest.mark.unit)
FILE = pytest.param("file", marks=pytest.mark.unit)  # its folder is made
POSTGRES = pytest.param("postgres", marks=pytest.mark.live)


@pytest.fixture(params=[MEMORY, FILE, POSTGRES])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Table]:
    yield from tables(request, tmp_path)


@pytest.fixture(params=[FILE, POSTGRES])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Table]:
    """A table that outlives its stores, and that several stores (processes) share."""
    yield from tables(request, tmp_path)


def store(
    table: Table,
    clock: Clock | None = None,
    *,
    count: int = 100,
    size: int = 1 << 20,
    ttl: float = 60.0,
) -> ResponseStore:
    return table.open(StoreLimits(count, size, ttl), clock or Clock())


def usage(s: ResponseStore) -> tuple[int, int]:
    held = s.usage()
    assert held is not None
    return held


def test_a_stored_response_comes_back_whole(table: Table) -> None:
    s = store(table)
    kept = StoredResponse(
        "resp_a",
        {"id": "resp_a", "output": [{"type": "message", "id": "msg_o", "content": []}]},
        [{"type": "message", "id": "msg_i", "role": "user", "content": "é ✓ \u0000"}],
    )
    assert s.put(kept)
    assert s.get("resp_a") == kept
    assert kept.conversation() == [*kept.input, *kept.response["output"]]
    assert s.get("resp_b") is None
    # With the tokens its model read and wrote.
    transcript = {"model": "m", "text": "<s>é ✓ ok", "ids": [1, 2, 3]}
    with_tokens = dataclasses.replace(kept, id="resp_t", transcript=transcript)
    assert s.put(with_tokens)
    assert s.get("resp_t") == with_tokens


def test_a_response_is_its_owners_alone(table: Table) -> None:
    """Another owner (or none) finds nothing, and cannot delete it; its owner can."""
    s = store(table)
    assert s.put(stored(1, owner="sha256:aa"))
    assert s.put(stored(2))  # no owner: a server without keys
    assert s.get("resp_1", "sha256:aa") == stored(1, owner="sha256:aa")
    for other in ("sha256:bb", None):
        assert s.get("resp_1", other) is None
        assert not s.delete("resp_1", other)
    assert s.get("resp_2") == stored(2)
    assert s.get("resp_2", "sha256:aa") is None
    assert not s.delete("resp_2", "sha256:aa")
    assert s.delete("resp_1", "sha256:aa")
    assert s.get("resp_1", "sha256:aa") is None
    assert s.delete("resp_2")


def test_it_expires_after_its_time_to_live(table: Table) -> None:
    clock = Clock()
    s = store(table, clock, ttl=30.0)
    s.put(stored(1))
    clock.now += 29.9
    assert s.get("resp_1") is not None
    clock.now += 0.2
    assert s.get("resp_1") is None
    assert not s.delete("resp_1"), "an expired response cannot be deleted either"


def test_the_oldest_go_first_past_the_count(table: Table) -> None:
    s = store(table, count=3)
    for n in range(5):
        s.put(stored(n))
    assert [n for n in range(5) if s.get(f"resp_{n}")] == [2, 3, 4]
    assert usage(s)[0] == 3
    assert s.evictions.counts == {EXPIRED: 0, OVER_LIMIT: 2}


def test_the_oldest_go_first_past_the_bytes(table: Table) -> None:
    one = len('{"response": {"id": "resp_0", "output": []}, "input": [') + 200
    s = store(table, size=3 * one)
    for n in range(5):
        s.put(stored(n, "x" * 100))
    count, size = usage(s)
    assert count == [s.get(f"resp_{n}") is not None for n in range(5)].count(True)
    assert size <= 3 * one
    assert s.get("resp_4") is not None and s.get("resp_0") is None
    assert s.evictions.counts[OVER_LIMIT] == 5 - count


def test_one_larger_than_the_byte_bound_is_not_kept(table: Table) -> None:
    s = store(table, size=200)
    s.put(stored(1))
    assert not s.put(stored(2, "x" * 500))
    assert s.get("resp_2") is None
    assert s.get("resp_1") is not None, "nothing else was evicted for it"


def test_expired_ones_are_dropped_at_the_next_write(table: Table) -> None:
    clock = Clock()
    s = store(table, clock, ttl=10.0)
    s.put(stored(1))
    s.put(stored(2))
    clock.now += 11
    s.put(stored(3))
    assert usage(s)[0] == 1
    assert s.evictions.counts == {EXPIRED: 2, OVER_LIMIT: 0}


def test_its_totals_follow_every_change(table: Table) -> None:
    """Count and bytes are kept by triggers; they must match the rows after a replace, a
    delete and an eviction."""
    s = store(table, count=2)
    s.put(stored(1, "a" * 50))
    s.put(stored(1, "b" * 10))  # the same id again: replaced
    s.put(stored(2))
    s.put(stored(3))  # evicts 1
    s.delete("resp_2")
    expected = (1, len(json.dumps({"response": stored(3).response, "input": stored(3).input})))
    assert usage(s) == table.rows() == expected


def test_delete_forgets_it_once(table: Table) -> None:
    s = store(table)
    s.put(stored(1))
    assert s.delete("resp_1")
    assert s.get("resp_1") is None
    assert not s.delete("resp_1")
    assert not s.delete("resp_unknown")


def test_the_table_outlives_its_store(shared: Table) -> None:
    clock = Clock()
    first = store(shared, clock)
    first.put(stored(1))
    first.put(stored(2))
    first.delete("resp_2")
    first.close()
    again = store(shared, clock)
    assert again.get("resp_1") == stored(1)
    assert again.get("resp_2") is None
    clock.now += 61
    assert again.get("resp_1") is None, "its time to live counts across restarts"


def test_two_stores_on_one_table_see_each_other(shared: Table) -> None:
    """Two processes or replicas (here: two stores) sharing one table."""
    a, b = store(shared), store(shared)
    a.put(stored(1, owner="sha256:aa"))
    assert b.get("resp_1", "sha256:aa") == stored(1, owner="sha256:aa")
    assert b.delete("resp_1", "sha256:aa")
    assert a.get("resp_1", "sha256:aa") is None


def test_writers_at_once_keep_the_bounds_and_the_totals(shared: Table) -> None:
    """Two stores writing and deleting at once from four threads (replicas under load): every
    write lands, the bound holds, the totals match the rows, and no writer deadlocks."""
    stores = [store(shared, count=20), store(shared, count=20)]
    failures: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for n in range(30):
                s = stores[(worker + n) % 2]
                s.put(stored(worker * 1000 + n, "x" * (n % 7) * 10))
                if n % 5 == 0:
                    s.delete(f"resp_{worker * 1000 + n - 1}")
        except BaseException as exc:  # reported below, from the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert usage(stores[0]) == usage(stores[1]) == shared.rows()
    assert usage(stores[0])[0] == 20
    evicted = sum(s.evictions.counts[OVER_LIMIT] for s in stores)
    deleted = 4 * 30 - 20 - evicted
    assert 0 < deleted <= 4 * 6
