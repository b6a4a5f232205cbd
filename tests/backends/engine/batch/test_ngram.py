"""Prompt-lookup drafting and the speculation rule, without a model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from backends.engine.batch import speculation
from backends.engine.batch.ngram import MAX_PAUSE, MISSES, DraftLength, NgramIndex
from backends.engine.batch.speculation import Speculation

pytestmark = pytest.mark.unit


def test_the_longest_ngram_that_stood_before_proposes_what_followed_it() -> None:
    index = NgramIndex(2, 4)
    index.sync([1, 2, 3, 9, 9, 7, 2, 3, 4, 5, 6, 1, 2, 3])
    # (1, 2, 3) stood at the start, followed by 9 9 7; (2, 3) last before by 4 5 6
    assert index.propose(3) == [9, 9, 7]
    index.sync([1, 2, 3, 9, 9, 7, 2, 3, 4, 5, 6, 1, 2, 3], last=4)
    assert index.propose(8) == [5, 6, 1, 2, 3, 4]  # up to the end of what it holds


def test_the_latest_occurrence_wins_and_nothing_is_proposed_without_one() -> None:
    index = NgramIndex(2, 3)
    index.sync([5, 6, 1, 5, 6, 2, 8, 5, 6])
    assert index.propose(2) == [2, 8]
    index.sync([5, 6, 1, 5, 6, 2, 8, 5, 6, 42])
    assert index.propose(2) == []  # (6, 42) and (5, 6, 42) never stood before
    assert NgramIndex().propose(4) == []


def test_sync_takes_only_the_new_tokens_and_the_chosen_one_once() -> None:
    index = NgramIndex(2, 2)
    index.sync([1, 2], last=3)
    index.sync([1, 2], last=3)
    index.sync([1, 2, 3], last=1)
    assert index.tokens == [1, 2, 3, 1]
    index.sync([1, 2, 3, 1, 2])
    assert index.propose(5) == [3, 1, 2]


def test_draft_length_grows_on_hits_shrinks_on_misses_and_pauses_a_row_that_keeps_missing() -> None:
    length = DraftLength(8)
    assert length.wanted() == 8
    length.settle(8, 8)
    assert length.k == 8  # never beyond the bound
    length.settle(8, 2)
    assert length.k == 3
    length.settle(3, 3)
    assert length.k == 6
    for _ in range(MISSES):
        length.settle(length.k, 0)
    assert length.k == 1 and length.pause > 0
    waits = 0
    while length.wanted() == 0:
        waits += 1
    assert waits == 4  # the first pause
    for _ in range(20):
        length.settle(1, 0)
    assert length.pause == MAX_PAUSE
    length.pause = 0
    length.settle(1, 1)  # a hit: no longer missing
    assert length.misses == 0 and length.k == 2


@dataclass
class _State:
    generated: int = 0
    guide: Any = None


@dataclass
class _Seq:
    tokens: list[int]
    next_token: int
    state: _State = field(default_factory=_State)
    drafter: Any = None


class _Grammar:
    constrains = True

    def validate(self, tokens: list[int]) -> int:
        return 2


def test_rows_draft_only_while_few_decode_and_within_their_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(speculation, "MAX_ROWS", 2)
    spec = Speculation(4)
    seqs = [_Seq([1, 2, 3, 4, 5, 1, 2], 3), _Seq([7, 8, 9, 7], 8)]
    drafts = spec.drafts(seqs, [9, 1])
    assert [(s.next_token, d) for s, d in drafts] == [(3, [4, 5, 1, 2]), (8, [9])]
    assert spec.drafts([*seqs, _Seq([1], 1)], [9, 9, 9]) == []  # three rows decode
    assert spec.drafts(seqs, [0, 0]) == []  # no room: the budget or the context ends
    assert Speculation(0).drafts(seqs, [9, 9]) == []  # off
    seqs[0].state.guide = _Grammar()
    [(_, draft), _] = spec.drafts(seqs, [9, 9])
    assert draft == [4, 5]  # cut where the grammar would refuse


def test_settling_counts_and_adapts_the_row() -> None:
    spec = Speculation(4, max_rows=8)
    seq = _Seq([1, 2, 1], 2)
    spec.settle(seq, 4, 1)
    assert (spec.drafted, spec.accepted, spec.runs) == (4, 1, 1)
    assert seq.drafter.length.k == 2
