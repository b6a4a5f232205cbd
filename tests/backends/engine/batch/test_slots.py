"""The batch engine's row bookkeeping: reuse, free rows first, LRU eviction."""

from __future__ import annotations

import pytest

from backends.engine.batch.slots import SlotTable, shared_length

pytestmark = pytest.mark.unit


def test_free_rows_are_handed_out_lowest_first() -> None:
    table = SlotTable(3, keep=0)
    assert [table.acquire([1, 2])[0] for _ in range(3)] == [0, 1, 2]
    table.release(1, None)
    table.release(0, None)
    assert table.acquire([5])[0] == 0


def test_a_continuation_takes_its_row_and_skips_the_shared_tokens() -> None:
    table = SlotTable(4, keep=4)
    row, shared = table.acquire([1, 2, 3, 4])
    table.release(row, [1, 2, 3, 4, 9])  # the prompt and the answer it held
    assert table.acquire([1, 2, 3, 4, 9, 7, 7]) == (row, 5)
    assert len(table) == 0


def test_at_least_two_prompt_tokens_are_left_to_feed() -> None:
    table = SlotTable(2, keep=2)
    table.release(table.acquire([1, 2, 3, 4])[0], [1, 2, 3, 4])
    assert table.acquire([1, 2, 3, 4])[1] == 2


def test_a_shared_template_prefix_does_not_take_another_conversation_s_row() -> None:
    table = SlotTable(2, keep=2)
    conversation = [1, 2, 3] + list(range(10, 40))
    row, _ = table.acquire(conversation)
    table.release(row, conversation)
    other, shared = table.acquire([1, 2, 3, 99, 98])  # same template start, new chat
    assert (other, shared) != (row, 3) and shared == 0
    assert table.resident(row) == conversation


def test_with_no_free_row_the_least_recent_resident_row_is_recycled() -> None:
    table = SlotTable(2, keep=2)
    for tokens in ([1, 1, 1], [2, 2, 2]):
        table.release(table.acquire(tokens)[0], tokens)
    row, shared = table.acquire([9, 9])
    assert table.resident(row) is None and shared == 0
    assert len(table) == 1


def test_keep_bounds_the_resident_rows() -> None:
    table = SlotTable(3, keep=1)
    rows = [table.acquire([i, i])[0] for i in range(3)]
    for r in rows:
        table.release(r, [r, r, r])
    assert len(table) == 1 and table.resident(rows[-1]) == [rows[-1]] * 3


def test_an_exchange_moves_a_resident_row_with_its_rank() -> None:
    table = SlotTable(3, keep=3)
    for tokens in ([1, 1], [2, 2]):
        table.release(table.acquire(tokens)[0], tokens)  # rows 0 and 1 resident, 0 oldest
    busy, _ = table.acquire([9])  # row 2
    table.exchange(busy, 0)  # the busy sequence moved into row 0; what row 0 held is in row 2
    assert table.resident(2) == [1, 1] and table.resident(0) is None
    assert table.acquire([7])[0] == 2  # no free row: the oldest resident is recycled, now row 2


def test_an_exchange_with_a_free_row_frees_the_busy_one() -> None:
    table = SlotTable(3, keep=0)
    table.acquire([1])
    busy, _ = table.acquire([2])  # row 1
    table.release(0, None)
    table.exchange(busy, 0)
    assert table.acquire([3])[0] == 1


def test_a_prompt_sharing_only_a_prefix_never_takes_the_row_while_one_is_free() -> None:
    """Another session with the same system prompt gets a free row (and a copy of the prefix,
    made by the strategy), even when it shares most of what the row holds."""
    table = SlotTable(3, keep=3)
    history = list(range(100)) + [7, 7]  # a long system prompt, a short turn
    row, _ = table.acquire(history)
    table.release(row, history)
    other, shared = table.acquire(list(range(100)) + [8, 8, 8])
    assert other != row and shared == 0
    assert table.resident(row) == history
    assert table.shareable() == [(row, history)]


def test_a_row_given_up_is_reported_before_it_is_reused() -> None:
    given_up: list[tuple[int, list[int]]] = []
    table = SlotTable(2, keep=1, on_evict=lambda row, tokens: given_up.append((row, tokens)))
    a, b = table.acquire([1, 1])[0], table.acquire([2, 2])[0]
    table.release(a, [1, 1, 1])
    table.release(b, [2, 2, 2])  # keep=1: a's row is given up
    assert given_up == [(a, [1, 1, 1])]
    row, _ = table.acquire([9, 9])  # no free row but a: b's row stays; a's is free
    assert row == a and given_up == [(a, [1, 1, 1])]
    table.acquire([8, 8])  # now b's resident row is taken
    assert given_up[-1] == (b, [2, 2, 2])


def test_with_nothing_kept_a_finished_row_is_given_up_at_once() -> None:
    given_up: list[tuple[int, list[int]]] = []
    table = SlotTable(2, keep=0, on_evict=lambda row, tokens: given_up.append((row, tokens)))
    row, _ = table.acquire([1, 2])
    table.release(row, [1, 2, 3])
    table.release(table.acquire([4])[0], None)  # failed: nothing to keep
    assert given_up == [(row, [1, 2, 3])] and len(table) == 0


@pytest.mark.parametrize(
    ("a", "b", "n"),
    [
        ([], [1], 0),
        ([1, 2], [1, 2], 2),
        ([1, 2, 3], [1, 2], 2),
        (list(range(600)), [*range(599), 0], 599),
        ([5], [6], 0),
    ],
)
def test_shared_length(a: list[int], b: list[int], n: int) -> None:
    assert shared_length(a, b) == shared_length(b, a) == n


def test_only_exact_positions_are_shared_or_given_up() -> None:
    """Positions from the first decoded one on are kept for the row's own next turn (in
    place) but never shared with another session nor handed to the store."""
    given_up: list[list[int]] = []
    table = SlotTable(3, keep=1, on_evict=lambda row, tokens: given_up.append(tokens))
    row, _ = table.acquire([1, 2, 3, 4])
    table.release(row, [1, 2, 3, 4, 9, 9], exact=4)  # its prompt, then two decoded tokens
    assert table.shareable() == [(row, [1, 2, 3, 4])] and table.exact(row) == 4
    assert table.acquire([1, 2, 3, 4, 9, 9, 5, 5]) == (row, 6)  # its own next turn: in place
    table.release(row, [1, 2, 3, 4, 9, 9, 5, 5, 7], exact=4)
    busy, _ = table.acquire([8, 8])
    table.exchange(busy, row)  # the resident row moves, its exact count with it
    assert table.shareable() == [(busy, [1, 2, 3, 4])]
    table.release(row, [8, 8, 8])  # keep=1: the older row is given up, its exact part only
    assert given_up == [[1, 2, 3, 4]]


def test_a_recycled_row_keeps_only_the_exact_part_it_shares() -> None:
    table = SlotTable(1, keep=1)
    row, _ = table.acquire([1, 2, 3, 4])
    table.release(row, [1, 2, 3, 4, 9, 9], exact=4)
    # No free row: the only resident row is recycled for a prompt that is not its continuation
    # but shares its answer too; the decoded positions are not reused.
    assert table.acquire([1, 2, 3, 4, 9, 8, 8]) == (row, 4)


def test_with_no_free_row_the_best_copy_source_stays() -> None:
    table = SlotTable(2, keep=2)
    system = list(range(100, 140))
    for tokens in (system + [1, 1], [7, 7, 7]):  # the shared system prompt's row is the older
        table.release(table.acquire(tokens)[0], tokens)
    rows = {tuple(tokens): row for row, tokens in table.shareable()}
    row, shared = table.acquire(system + [2, 2])
    assert row == rows[(7, 7, 7)] and shared == 0  # the other row went; the strategy copies
    assert table.shareable() == [(rows[tuple(system + [1, 1])], system + [1, 1])]
    # The source alone left: it is taken, with what it shares.
    assert table.acquire(system + [3, 3]) == (rows[tuple(system + [1, 1])], 40)
