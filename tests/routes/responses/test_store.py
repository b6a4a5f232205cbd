"""The stored responses' table (routes/responses/store.py), no model: what it keeps, its time to
live on an injected clock, its bounds (count and bytes, oldest first), deletes, and a file that
survives being closed and opened again."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from routes.responses.store import ResponseStore, StoredResponse, StoreLimits

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def stored(n: int, text: str = "hi") -> StoredResponse:
    item = {"type": "message", "id": f"msg_{n}", "role": "user", "content": text}
    return StoredResponse(f"resp_{n}", {"id": f"resp_{n}", "output": []}, [item])


def store(
    path: Path | None = None,
    clock: Clock | None = None,
    *,
    count: int = 100,
    size: int = 1 << 20,
    ttl: float = 60.0,
) -> ResponseStore:
    return ResponseStore(path, StoreLimits(count, size, ttl), clock or Clock())


def test_a_stored_response_comes_back_whole() -> None:
    s = store()
    kept = StoredResponse(
        "resp_a",
        {"id": "resp_a", "output": [{"type": "message", "id": "msg_o", "content": []}]},
        [{"type": "message", "id": "msg_i", "role": "user", "content": "é ✓"}],
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


def test_it_expires_after_its_time_to_live() -> None:
    clock = Clock()
    s = store(clock=clock, ttl=30.0)
    s.put(stored(1))
    clock.now += 29.9
    assert s.get("resp_1") is not None
    clock.now += 0.2
    assert s.get("resp_1") is None
    assert not s.delete("resp_1"), "an expired response cannot be deleted either"


def test_the_oldest_go_first_past_the_count() -> None:
    s = store(count=3)
    for n in range(5):
        s.put(stored(n))
    assert [n for n in range(5) if s.get(f"resp_{n}")] == [2, 3, 4]
    assert s.usage()[0] == 3


def test_the_oldest_go_first_past_the_bytes() -> None:
    one = len('{"response": {"id": "resp_0", "output": []}, "input": [') + 200
    s = store(size=3 * one)
    for n in range(5):
        s.put(stored(n, "x" * 100))
    count, size = s.usage()
    assert count == [s.get(f"resp_{n}") is not None for n in range(5)].count(True)
    assert size <= 3 * one
    assert s.get("resp_4") is not None and s.get("resp_0") is None


def test_one_larger_than_the_byte_bound_is_not_kept() -> None:
    s = store(size=200)
    s.put(stored(1))
    assert not s.put(stored(2, "x" * 500))
    assert s.get("resp_2") is None
    assert s.get("resp_1") is not None, "nothing else was evicted for it"


def test_expired_ones_are_dropped_at_the_next_write() -> None:
    clock = Clock()
    s = store(clock=clock, ttl=10.0)
    s.put(stored(1))
    clock.now += 11
    s.put(stored(2))
    assert s.usage()[0] == 1


def test_its_totals_follow_every_change() -> None:
    """Count and bytes are kept by triggers; they must match the rows after a replace, a
    delete and an eviction."""
    s = store(count=2)
    s.put(stored(1, "a" * 50))
    s.put(stored(1, "b" * 10))  # the same id again: replaced
    s.put(stored(2))
    s.put(stored(3))  # evicts 1
    s.delete("resp_2")
    rows = s._db.execute("SELECT COUNT(*), SUM(bytes) FROM responses").fetchone()
    assert (
        s.usage()
        == rows
        == (1, len(json.dumps({"response": stored(3).response, "input": stored(3).input})))
    )


def test_delete_forgets_it_once() -> None:
    s = store()
    s.put(stored(1))
    assert s.delete("resp_1")
    assert s.get("resp_1") is None
    assert not s.delete("resp_1")
    assert not s.delete("resp_unknown")


def test_a_file_survives_closing_and_opening_again(tmp_path: Path) -> None:
    path = tmp_path / "state" / "responses.db"  # its folder is made
    clock = Clock()
    first = store(path, clock)
    first.put(stored(1))
    first.put(stored(2))
    first.delete("resp_2")
    first.close()
    again = store(path, clock)
    assert again.get("resp_1") == stored(1)
    assert again.get("resp_2") is None
    clock.now += 61
    assert again.get("resp_1") is None, "its time to live counts across restarts"


def test_two_stores_on_one_file_see_each_other(tmp_path: Path) -> None:
    """Two processes (here: two connections) sharing one file, as replicas on a volume."""
    path = tmp_path / "responses.db"
    a, b = store(path), store(path)
    a.put(stored(1))
    assert b.get("resp_1") == stored(1)
    assert b.delete("resp_1")
    assert a.get("resp_1") is None
