"""Prompt-lookup drafting and the speculation rule, without a model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from backends.engine.batch.ngram import NgramIndex
from backends.engine.batch.speculation import PROBE_WAIT, Drafter, DraftLength, Speculation
from backends.engine.batch.speculation_policy import Costs
from backends.types import GenerationParams, Speculative

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


def test_a_copying_row_drafts_long_a_missing_row_stops_and_probes_now_and_then() -> None:
    length, costs = DraftLength(8), Costs()  # the prior figures: nothing timed yet
    first = length.wanted(1, costs)
    assert 1 <= first < 8  # a new row: a short draft
    for _ in range(6):
        length.settle(length.wanted(1, costs), length.wanted(1, costs))  # every token taken
    assert length.wanted(1, costs) >= 5
    misses = 0
    while (k := length.wanted(1, costs)) > 0:
        length.settle(k, 0)
        misses += 1
    assert misses <= 6  # its drafts now miss: it soon stops
    # The last miss was a probe; the next comes after PROBE_WAIT steps, then twice as many.
    probes = [length.wanted(1, costs) for _ in range(3 * PROBE_WAIT + 1)]
    assert [i for i, k in enumerate(probes) if k] == [PROBE_WAIT - 1, 3 * PROBE_WAIT]
    length.settle(1, 1)  # a probe taken: the row is back
    assert length.probes == 0


def test_many_rows_decoding_leave_only_rows_that_copy_nearly_everything() -> None:
    sure, good = DraftLength(8, hits=99.0, judged=100.0), DraftLength(8, hits=8.0, judged=10.0)
    costs = Costs()  # as timed on a quiet AMD EPYC (docs/speculation.md), T(1) = 7.3 ms
    for rows, share in ((1, 1.0), (2, 0.61), (4, 0.40), (8, 0.43)):
        costs.stepped(rows, 7.3e-3 * rows * share)
    for k, c in enumerate((1.21, 1.50, 1.68, 1.91, 2.17, 2.37, 2.58, 2.83), start=1):
        costs.verified(k, 7.3e-3 * c)
    assert good.wanted(1, costs) > 0 and good.wanted(8, costs) == 0
    assert sure.wanted(8, costs) > 0
    assert [good.wanted(1, costs) for _ in range(20)].count(0) == 0  # it pays: no probes


@dataclass
class _State:
    generated: int = 0
    guide: Any = None


@dataclass
class _Job:
    id: str = "job"
    params: GenerationParams = field(default_factory=lambda: GenerationParams(max_new_tokens=9))
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_runs: int = 0


@dataclass
class _Seq:
    tokens: list[int]
    next_token: int
    state: _State = field(default_factory=_State)
    drafter: Any = None
    job: _Job = field(default_factory=_Job)


class _Grammar:
    constrains = True

    def validate(self, tokens: list[int]) -> int:
        return 2


def rooms(seqs: list[_Seq], values: list[int]) -> Callable[[_Seq], int]:
    """Each row's room, by the row."""
    table = {id(seq): value for seq, value in zip(seqs, values, strict=True)}
    return lambda seq: table[id(seq)]


def copying(seq: _Seq, spec: Speculation) -> _Seq:
    spec.drafter(seq).length = DraftLength(spec.tokens, hits=99.0, judged=100.0)
    return seq


def test_rows_draft_within_their_room_and_only_while_it_pays() -> None:
    spec = Speculation(4)
    seqs = [copying(_Seq([1, 2, 3, 4, 5, 1, 2], 3), spec), copying(_Seq([7, 8, 9, 7], 8), spec)]
    drafts = spec.drafts(seqs, rooms(seqs, [9, 1]))
    assert [(s.next_token, d) for s, d in drafts] == [(3, [4, 5, 1, 2]), (8, [9])]
    assert spec.drafts(seqs, lambda seq: 0) == []  # no room: the budget or the context ends
    free = [_Seq([1, 2, 3, 1, 2], 3) for _ in range(8)]
    for seq in free:
        spec.drafter(seq).length = DraftLength(4, hits=1.0, judged=2.0)
    assert len(spec.drafts(free[:1], lambda seq: 9)) == 1  # half taken: it pays alone
    assert spec.drafts(free, lambda seq: 9) == []  # not with eight rows decoding
    assert Speculation(0).drafts([_Seq([1, 2, 3, 1, 2], 3)], lambda seq: 9) == []  # off
    seqs[0].state.guide = _Grammar()
    seqs[1].drafter.length = DraftLength(4, hits=99.0, judged=100.0)
    [(_, draft), _] = spec.drafts(seqs, lambda seq: 9)
    assert draft == [4, 5]  # cut where the grammar would refuse


def test_settling_counts_and_adapts_the_row() -> None:
    spec = Speculation(4)
    seq = _Seq([1, 2, 1], 2)
    before = spec.drafter(seq).length.acceptance
    spec.settle(seq, 4, 1)
    assert (spec.drafted, spec.accepted, spec.runs) == (4, 1, 1)
    assert seq.drafter.length.acceptance < before


def asking(override: Speculative | None) -> _Job:
    return _Job(params=GenerationParams(max_new_tokens=9, speculative=override))


def test_a_request_overrides_the_servers_settings() -> None:
    off, on = Speculation(0), Speculation(4, 2, 4)
    seq = _Seq([5, 6, 7, 1, 2, 3, 5, 6, 7], 1, job=asking(Speculative(6, 3, 3)))
    drafter: Drafter = off.drafter(seq)
    assert drafter.length.most == 6 and (drafter.index.lo, drafter.index.hi) == (3, 3)
    assert on.drafter(_Seq([1], 1, job=asking(Speculative(0)))).length.most == 0  # turned off
    assert on.drafts([_Seq([1, 2, 1], 2, job=asking(Speculative(0)))], lambda seq: 9) == []
    asked = off.drafter(_Seq([1], 1, job=asking(Speculative()))).length.most
    assert asked == 8  # asked for, with no bound, on a server with it off
    assert on.drafter(_Seq([1], 1, job=asking(Speculative()))).length.most == 4  # the server's


def test_a_lookup_bound_given_alone_moves_the_other() -> None:
    server = Speculative(4, 2, 4)
    assert Speculative(lookup_max=1).over(server) == Speculative(4, 1, 1)
    assert Speculative(lookup_min=6).over(server) == Speculative(4, 6, 6)
    assert Speculative(lookup_min=3).over(server) == Speculative(4, 3, 4)
    assert Speculative(2, 1, 3).over(server) == Speculative(2, 1, 3)


def test_an_ended_sequence_counts_its_drafts_on_its_job() -> None:
    spec = Speculation(4)
    seq = _Seq([1, 2, 1], 2)
    spec.settle(seq, 4, 3)
    spec.settle(seq, 2, 0)
    spec.ended(seq)
    assert (seq.job.drafted_tokens, seq.job.accepted_tokens, seq.job.verify_runs) == (6, 3, 2)
