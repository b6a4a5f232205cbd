"""The KV-event ledger: which full blocks the rows (GPU) and the prefix store (CPU) hold, told as
BlockStored / BlockRemoved once per change, parents first, with the store's hash chain."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from backends.engine.batch.block_ledger import BlockLedger, block_hash
from backends.engine.batch.prefix_store import PrefixStore, block_keys
from backends.engine.kv_events import (
    CPU,
    GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
)

pytestmark = pytest.mark.unit

BLOCK = 4


class Sink:
    def __init__(self) -> None:
        self.batches: list[list[KVEvent]] = []

    def __call__(self, events: Sequence[KVEvent]) -> None:
        self.batches.append(list(events))

    def take(self) -> list[KVEvent]:
        events = [e for batch in self.batches for e in batch]
        self.batches.clear()
        return events


def hashes(tokens: list[int]) -> tuple[int, ...]:
    return tuple(block_hash(k) for k in block_keys(tokens, BLOCK))


def ledger() -> tuple[BlockLedger, Sink]:
    sink = Sink()
    return BlockLedger(BLOCK, sink), sink


PROMPT = list(range(100, 111))  # 2 full blocks and 3 tokens


def test_a_row_tells_its_full_blocks_once_then_only_what_it_adds() -> None:
    book, sink = ledger()
    book.rows([(0, PROMPT)])
    book.flush()
    assert sink.take() == [BlockStored(hashes(PROMPT), None, tuple(PROMPT[:8]), BLOCK, GPU)]
    book.rows([(0, PROMPT)])
    book.flush()
    assert sink.take() == []  # a decode step: nothing new
    longer = PROMPT + [7, 8, 9]
    book.rows([(0, longer)])
    book.flush()
    first, second, third = hashes(longer)
    assert sink.take() == [BlockStored((third,), second, tuple(longer[8:12]), BLOCK, GPU)]


def test_a_block_several_rows_hold_goes_when_the_last_lets_it_go() -> None:
    book, sink = ledger()
    other = PROMPT[:8] + [1, 2, 3, 4]  # shares two blocks, then its own third
    book.rows([(0, PROMPT), (1, other)])
    book.flush()
    first, second, third = hashes(other)
    assert sink.take() == [BlockStored((first, second, third), None, tuple(other), BLOCK, GPU)]
    book.rows([(1, other)])  # row 0 is given up: row 1 still holds the first two
    book.flush()
    assert sink.take() == []
    book.rows([])
    book.flush()
    assert sink.take() == [BlockRemoved((first, second, third), GPU)]


def test_a_row_that_takes_another_prompt_keeps_what_they_share() -> None:
    book, sink = ledger()
    book.rows([(0, PROMPT)])
    book.flush()
    sink.take()
    turned = PROMPT[:4] + [9, 9, 9, 9, 9]
    book.rows([(0, turned)])
    book.flush()
    first, old_second = hashes(PROMPT)
    assert sink.take() == [
        BlockRemoved((old_second,), GPU),
        BlockStored(hashes(turned)[1:], first, tuple(turned[4:8]), BLOCK, GPU),
    ]


def test_rows_that_swap_places_tell_nothing() -> None:
    book, sink = ledger()
    other = [5, 5, 5, 5, 6, 6, 6, 6]
    book.rows([(0, PROMPT), (1, other)])
    book.flush()
    sink.take()
    book.rows([(0, other), (1, PROMPT)])
    book.flush()
    assert sink.take() == []


def test_a_block_held_and_let_go_between_flushes_is_never_told() -> None:
    book, sink = ledger()
    book.rows([(0, PROMPT)])
    book.rows([])
    book.flush()
    assert sink.take() == []


def test_the_store_tells_its_blocks_on_the_cpu_tier_as_it_adds_and_evicts() -> None:
    book, sink = ledger()
    per_token = 8
    store = PrefixStore(2 * BLOCK * per_token, per_token, block_tokens=BLOCK, listener=book)

    def read(lo: int, hi: int) -> np.ndarray:
        return np.zeros((1, 2, 1, hi - lo, 1), dtype=np.float32)  # 8 bytes a token

    book.rows([(0, PROMPT)])
    store.put(PROMPT, read)  # the row is given up to the store in the same step
    book.rows([])
    book.flush()
    first, second = hashes(PROMPT)
    # The row's blocks came and went within the step: only the store's are told.
    assert sink.take() == [BlockStored((first, second), None, tuple(PROMPT[:8]), BLOCK, CPU)]
    other = [1, 2, 3, 4, 5, 6, 7, 8]
    store.put(other, read)  # two more blocks in a store of two: the older chain goes
    book.flush()
    assert sink.take() == [
        BlockRemoved((second, first), CPU),  # in the order evicted: tails first
        BlockStored(hashes(other), None, tuple(other), BLOCK, CPU),
    ]


def test_clearing_tells_all_blocks_cleared_and_forgets_them() -> None:
    book, sink = ledger()
    book.rows([(0, PROMPT)])
    book.flush()
    sink.take()
    book.clear()
    assert sink.take() == [AllBlocksCleared()]
    book.rows([(0, PROMPT)])
    book.flush()
    assert [type(e) for e in sink.take()] == [BlockStored]  # told anew


def test_a_hash_is_the_store_keys_first_eight_bytes_and_never_zero() -> None:
    key = block_keys(PROMPT, BLOCK)[0]
    assert block_hash(key) == int.from_bytes(key[:8], "big")
    assert block_hash(bytes(16)) == 1
