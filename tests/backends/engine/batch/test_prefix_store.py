"""The host-RAM prefix store: hash-chain matching, LRU within a byte bound, tails first."""

from __future__ import annotations

import numpy as np
import pytest

from backends.engine.batch.prefix_store import PrefixStore, block_keys

pytestmark = pytest.mark.unit

BLOCK = 4
PER_TOKEN = 2 * 1 * 1 * 2 * 4  # layers=1 x (key, value) x kv_heads=1 x head_size=2 x fp32


def reader(tokens: list[int]):
    """KV whose every position carries its token id: what a restore hands back shows where it
    came from. Also counts the blocks read."""
    reads: list[tuple[int, int]] = []

    def read(lo: int, hi: int) -> np.ndarray:
        reads.append((lo, hi))
        kv = np.zeros((1, 2, 1, hi - lo, 2), dtype=np.float32)
        kv[..., :] = np.asarray(tokens[lo:hi], dtype=np.float32)[:, None]
        return kv

    return read, reads


def store(blocks: int) -> PrefixStore:
    return PrefixStore(blocks * BLOCK * PER_TOKEN, PER_TOKEN, block_tokens=BLOCK)


def restored(s: PrefixStore, prompt: list[int]) -> list[int]:
    kv = s.take(s.match(prompt))
    return [int(x) for block in kv for x in block[0, 0, 0, :, 0]]


def test_a_key_names_the_block_and_everything_before_it() -> None:
    a = block_keys([1, 2, 3, 4, 5, 6, 7, 8, 9], BLOCK)
    b = block_keys([1, 2, 3, 4, 5, 6, 7, 8], BLOCK)
    c = block_keys([0, 2, 3, 4, 5, 6, 7, 8], BLOCK)
    assert len(a) == 2 and a == b  # full blocks only
    assert c[1] != a[1]  # same tokens in block 1, another parent


def test_a_prompt_restores_the_longest_run_of_stored_blocks() -> None:
    s = store(16)
    row = list(range(100, 114))  # 3 full blocks and 2 tokens
    read, reads = reader(row)
    assert s.put(row, read) == 3 and len(reads) == 3
    assert restored(s, row[:10] + [7, 7, 7, 7]) == row[:8]  # block 3 differs
    assert restored(s, [5, *row]) == []  # shifted: no block matches
    assert restored(s, row + [1, 2, 3]) == row[:12]


def test_blocks_already_held_are_not_read_again_and_are_shared() -> None:
    s = store(16)
    first = [1, 2, 3, 4, 5, 6, 7, 8]
    s.put(first, reader(first)[0])
    other = [1, 2, 3, 4, 9, 9, 9, 9]
    read, reads = reader(other)
    assert s.put(other, read) == 1 and reads == [(4, 8)]
    assert len(s) == 3 and s.nbytes == 3 * BLOCK * PER_TOKEN


def test_the_byte_bound_evicts_least_recently_used_tails_first() -> None:
    s = store(4)
    a = list(range(1, 13))  # 3 blocks
    s.put(a, reader(a)[0])
    b = list(range(50, 58))  # 2 more: one of a's must go, its tail
    s.put(b, reader(b)[0])
    assert len(s) == 4 and s.nbytes == 4 * BLOCK * PER_TOKEN
    assert s.stats.evictions == 1 and s.stats.bytes == s.nbytes
    assert restored(s, a) == a[:8]
    assert restored(s, b) == b
    # a was used last but b after it: adding c evicts a's blocks (tail first), not b's.
    c = list(range(80, 88))
    s.put(c, reader(c)[0])
    assert restored(s, b) == b and restored(s, c) == c and restored(s, a) == []


def test_a_use_keeps_a_chain_from_eviction() -> None:
    s = store(4)
    a, b = [1, 2, 3, 4, 5, 6, 7, 8], [9, 9, 9, 9, 8, 8, 8, 8]
    s.put(a, reader(a)[0])
    s.put(b, reader(b)[0])
    restored(s, a)  # a is now the most recent
    c = [3, 3, 3, 3]
    s.put(c, reader(c)[0])
    assert restored(s, a) == a and restored(s, b) == b[:4]


def test_a_row_longer_than_the_store_keeps_its_first_blocks() -> None:
    s = store(2)
    row = list(range(20))
    read, reads = reader(row)
    s.put(row, read)
    assert len(reads) == 2 and restored(s, row) == row[:8] and s.stats.evictions == 0


def test_a_store_smaller_than_a_block_holds_nothing() -> None:
    s = PrefixStore(BLOCK * PER_TOKEN - 1, PER_TOKEN, block_tokens=BLOCK)
    row = list(range(8))
    assert s.put(row, reader(row)[0]) == 0 and len(s) == 0 and s.nbytes == 0


def test_a_hash_collision_cannot_hand_out_another_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    import backends.engine.batch.prefix_store as module

    # Every block hashes alike: the stored tokens still tell them apart.
    monkeypatch.setattr(
        module, "block_keys", lambda tokens, size: [b"same"] * (len(tokens) // size)
    )
    s = store(8)
    a = [1, 2, 3, 4]
    s.put(a, reader(a)[0])
    assert s.match([5, 6, 7, 8]) == []
    assert s.match(a) == [b"same"]


def test_a_full_store_makes_room_before_it_adds_so_it_never_passes_its_bound() -> None:
    """Each block is added after room is made for it: read at any moment, the store holds at
    most its capacity (it used to add a whole row, then evict)."""
    s = store(4)
    a = list(range(1, 17))  # 4 blocks: the store is full
    s.put(a, reader(a)[0])
    seen: list[int] = []
    b = list(range(50, 66))  # 4 more: all of a's must go
    read_b, _ = reader(b)

    def read(lo: int, hi: int) -> np.ndarray:
        seen.append(s.nbytes)
        return read_b(lo, hi)

    assert s.put(b, read) == 4
    assert seen and max(seen) <= s.capacity_bytes
    assert s.nbytes == s.capacity_bytes and s.stats.evictions == 4
    assert restored(s, b) == b and restored(s, a) == []
