"""The stored responses' tables (routes/responses/store.py), no model, each test on each table:
SQLite in memory and in a file (unit tier), and a real PostgreSQL (live tier: a server process,
tests/postgres.py). What a table keeps, its owners, its time to live on an injected clock, its
bounds (count and bytes, oldest first) and the evictions they count, each key's quota (only its
own oldest go) and the table's bounds reached by many keys (the largest holder's oldest go),
deletes, and a table that outlives one store and is shared by two."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import ServerSettings
from routes.responses.postgres_store import PostgresStore
from routes.responses.sqlite_store import SqliteStore
from routes.responses.state import MIB, store_limits
from routes.responses.store import (
    EXPIRED,
    OVER_KEY_LIMIT,
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
    owners: Callable[[], tuple[Held, Held]]  # as the table keeps them, as the rows count


def sqlite_rows(s: ResponseStore) -> tuple[int, int]:
    assert isinstance(s, SqliteStore)
    query = "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM responses"
    count, size = s._db.execute(query).fetchone()
    return int(count), int(size)


BY_OWNER = "SELECT COALESCE(owner, ''), COUNT(*), SUM(bytes) FROM {} GROUP BY 1"
Held = dict[str, tuple[int, int]]  # each owner's (count, bytes); '' for none


def by_owner(rows: list[tuple[Any, ...]]) -> Held:
    return {str(owner): (int(count), int(size)) for owner, count, size in rows}


def sqlite_owners(s: ResponseStore) -> tuple[Held, Held]:
    assert isinstance(s, SqliteStore)
    kept = s._db.execute("SELECT owner, count, bytes FROM owners").fetchall()
    return by_owner(kept), by_owner(s._db.execute(BY_OWNER.format("responses")).fetchall())


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

        def owners() -> tuple[Held, Held]:
            kept = server.sql(url, "SELECT owner, count, bytes FROM genai_responses_owners")
            return by_owner(kept), by_owner(server.sql(url, BY_OWNER.format("genai_responses")))

        yield Table("postgres", lambda lim, c: keep(PostgresStore(url, lim, c)), rows, owners)
    else:
        path = tmp_path / "state" / "responses.db" if request.param == "file" else None
        yield Table(
            request.param,
            lambda lim, c: keep(SqliteStore(path, lim, c)),
            lambda: sqlite_rows(opened[0]),
            lambda: sqlite_owners(opened[0]),
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
    key_count: int | None = None,
    key_size: int | None = None,
) -> ResponseStore:
    return table.open(StoreLimits(count, size, ttl, key_count, key_size), clock or Clock())


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
    assert s.evictions.counts == {EXPIRED: 0, OVER_LIMIT: 2, OVER_KEY_LIMIT: 0}


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


A, B, C, D = "sha256:aa", "sha256:bb", "sha256:cc", "sha256:dd"  # four keys' hashes


def held(s: ResponseStore, owner: str, ids: range) -> list[int]:
    return [n for n in ids if s.get(f"resp_{n}", owner) is not None]


def test_one_key_cannot_evict_anothers_past_its_quota(table: Table) -> None:
    """The issue's probe, at the table: A stores one, B many more than its quota of 5; A's is
    still there, B keeps its newest 5, and only B's own went (as key_limit evictions)."""
    s = store(table, count=100, key_count=5)
    assert s.put(stored(0, owner=A))
    for n in range(1, 51):
        assert s.put(stored(n, owner=B))
    assert s.get("resp_0", A) == stored(0, owner=A)
    assert held(s, B, range(1, 51)) == [46, 47, 48, 49, 50]
    assert usage(s)[0] == 6
    assert s.evictions.counts == {EXPIRED: 0, OVER_LIMIT: 0, OVER_KEY_LIMIT: 45}
    assert s.keys() == (2, 1), "two keys hold responses; B is at its quota"
    kept, counted = table.owners()
    assert kept == counted and len(kept) == 2


def test_one_key_cannot_evict_anothers_past_its_byte_quota(table: Table) -> None:
    one = len(json.dumps({"response": stored(10, "x" * 100).response, "input": [{}]})) + 80
    s = store(table, size=1 << 20, key_size=3 * one)
    assert s.put(stored(0, owner=A))
    for n in range(10, 30):
        assert s.put(stored(n, "x" * 100, owner=B))
    assert s.get("resp_0", A) is not None
    kept = held(s, B, range(10, 30))
    assert kept == list(range(30 - len(kept), 30)) and 1 <= len(kept) <= 3, "its newest"
    assert sorted(table.owners()[0].values()) == sorted(table.owners()[1].values())
    assert max(size for _, size in table.owners()[0].values()) <= 3 * one
    assert s.evictions.counts[OVER_KEY_LIMIT] == 20 - len(kept)
    assert s.evictions.counts[OVER_LIMIT] == 0
    # One larger than a key's byte quota is not kept (and evicts none of its own for it).
    assert not s.put(stored(99, "x" * 4 * one, owner=B))
    assert held(s, B, range(10, 30)) == kept


def test_the_tables_bound_takes_from_the_largest_holder(table: Table) -> None:
    """Many keys, each within its quota, fill the table: its bound still holds, by evicting the
    oldest of the key holding the most; a key that holds one keeps it."""
    s = store(table, count=10, key_count=4)
    assert s.put(stored(0, owner=A))
    for n, owner in enumerate([B] * 4 + [C] * 4 + [D] * 4, start=1):
        assert s.put(stored(n, owner=owner))
    assert usage(s)[0] == 10
    assert s.get("resp_0", A) is not None
    mine = {k: held(s, k, range(1, 13)) for k in (B, C, D)}
    assert sorted(len(v) for v in mine.values()) == [3, 3, 3]
    for k, first in ((B, 1), (C, 5), (D, 9)):
        assert mine[k] == list(range(first + 1, first + 4)), "each kept its newest"
    assert s.evictions.counts == {EXPIRED: 0, OVER_LIMIT: 3, OVER_KEY_LIMIT: 0}
    # More from D: D now holds the most, so D's own oldest go, and A's one stays.
    for n in range(13, 20):
        assert s.put(stored(n, owner=D))
    assert s.get("resp_0", A) is not None
    assert usage(s)[0] == 10
    kept, counted = table.owners()
    assert kept == counted


def test_the_tables_byte_bound_takes_from_the_largest_holder(table: Table) -> None:
    one = len(json.dumps({"response": stored(10, "x" * 100).response, "input": [{}]})) + 80
    s = store(table, size=6 * one, key_size=4 * one)
    assert s.put(stored(0, owner=A))
    for n in range(10, 20):
        assert s.put(stored(n, "x" * 100, owner=B if n % 2 else C))
    assert s.get("resp_0", A) is not None
    assert usage(s)[1] <= 6 * one
    assert held(s, B, range(10, 20)) and held(s, C, range(10, 20))
    assert s.get("resp_19", B) is not None and s.get("resp_18", C) is not None


def test_without_keys_the_table_alone_bounds_it(table: Table) -> None:
    """Rows stored without keys have no quota (a server without keys has one owner); the
    table's bound takes them oldest first, as before keys had quotas."""
    s = store(table, count=6, key_count=2)
    for n in range(8):
        assert s.put(stored(n))
    assert [n for n in range(8) if s.get(f"resp_{n}")] == [2, 3, 4, 5, 6, 7]
    assert s.keys() == (0, 0)
    # A key beside them: the table's bound takes from the largest holder, the keyless rows.
    assert s.put(stored(8, owner=A))
    assert s.get("resp_8", A) is not None and s.get("resp_2") is None


@pytest.mark.unit
def test_each_keys_quota_is_a_quarter_of_the_tables_unless_set() -> None:
    quarter = store_limits(ServerSettings())
    assert quarter.per_key == (250, 16 * MIB) and quarter.table == (1000, 64 * MIB)
    given = store_limits(ServerSettings(responses_key_max=10, responses_key_max_mib=0.5))
    assert given.per_key == (10, MIB // 2)
    # Never more than the table's own bounds.
    above = store_limits(ServerSettings(responses_max=5, responses_key_max=50))
    assert above.per_key[0] == 5
    assert store_limits(ServerSettings(responses_max=2)).per_key[0] == 1


def test_expired_ones_are_dropped_at_the_next_write(table: Table) -> None:
    clock = Clock()
    s = store(table, clock, ttl=10.0)
    s.put(stored(1))
    s.put(stored(2))
    clock.now += 11
    s.put(stored(3))
    assert usage(s)[0] == 1
    assert s.evictions.counts == {EXPIRED: 2, OVER_LIMIT: 0, OVER_KEY_LIMIT: 0}


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
    """Two stores writing and deleting at once from four threads (replicas under load), each
    thread a key: every write lands, the bounds hold, the totals (the table's, each key's)
    match the rows, and no writer deadlocks."""
    stores = [store(shared, count=20, key_count=8), store(shared, count=20, key_count=8)]
    failures: list[BaseException] = []

    def write(worker: int) -> None:
        key = (A, B, C, D)[worker]
        try:
            for n in range(30):
                s = stores[(worker + n) % 2]
                s.put(stored(worker * 1000 + n, "x" * (n % 7) * 10, owner=key))
                if n % 5 == 0:
                    s.delete(f"resp_{worker * 1000 + n - 1}", key)
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
    kept, counted = shared.owners()
    assert kept == counted and all(count <= 8 for count, _ in kept.values())
    evicted = sum(
        s.evictions.counts[OVER_LIMIT] + s.evictions.counts[OVER_KEY_LIMIT] for s in stores
    )
    deleted = 4 * 30 - 20 - evicted
    assert 0 < deleted <= 4 * 6
