"""N-gram (prompt-lookup) speculation: which decoding rows draft this step, and what.

A drafting row feeds its next token and up to ``k`` drafted tokens in one run of its own:
onnxruntime's CPU GroupQueryAttention takes several new tokens over a past only at batch size
1 ("batch_size must be 1 when sequence_length > 1 and past context is given"), so such a row
leaves the batched decode run for a batch-1 run of ``1 + k`` tokens beside it. The strategy
then takes the choice at each position (the sampler's, with the sequence's state as of the
tokens accepted before it) while it equals the draft token fed there.

It pays when that run costs little more than the row's share of a batched step. On two cores
a decode step of ``n`` rows costs about as much as ``n`` batch-1 verify runs once ``n`` is a
few rows, so rows draft only while at most ``max_rows`` rows decode (docs/speculation.md has
the measurements behind the default).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from backends.engine.batch.ngram import DraftLength, NgramIndex
from backends.engine.batch.sampler import Choice, choose

log = logging.getLogger("genai.batch")

# Rows decoding at most for rows to draft (docs/speculation.md: where it stops paying).
MAX_ROWS = 2


@dataclass
class Drafter:
    """One sequence's lookup, draft length and counts."""

    index: NgramIndex
    length: DraftLength
    drafted: int = 0
    accepted: int = 0
    runs: int = 0

    def settle(self, drafted: int, accepted: int) -> None:
        self.length.settle(drafted, accepted)
        self.drafted += drafted
        self.accepted += accepted
        self.runs += 1


@dataclass
class Speculation:
    """The engine's speculation settings and its totals."""

    tokens: int  # most tokens a row drafts (its k); 0: no speculation
    max_rows: int | None = None  # rows decoding at most for rows to draft; None: MAX_ROWS
    drafted: int = 0
    accepted: int = 0
    runs: int = 0

    def drafts(self, rows: Sequence[Any], room: Sequence[int]) -> list[tuple[Any, list[int]]]:
        """The rows that draft this step and their drafts. ``rows`` are the sequences with a
        token to feed (``tokens``, ``next_token``, ``state``), ``room[i]`` how many tokens row
        ``i`` may draft at most (its budget and the context's end)."""
        limit = MAX_ROWS if self.max_rows is None else self.max_rows
        if self.tokens <= 0 or len(rows) > limit:
            return []
        out = []
        for seq, most in zip(rows, room, strict=True):
            drafter = self.drafter(seq)
            if most <= 0:
                continue
            k = min(drafter.length.wanted(), most)
            if k <= 0:
                continue
            drafter.index.sync(seq.tokens, seq.next_token)
            draft = drafter.index.propose(k)
            guide = seq.state.guide
            if draft and guide is not None and guide.constrains:
                draft = draft[: guide.validate(draft)]
            if draft:
                out.append((seq, draft))
        return out

    def drafter(self, seq: Any) -> Drafter:
        """The sequence's drafter, made on its first look (kept on it: ``seq.drafter``)."""
        if seq.drafter is None:
            seq.drafter = Drafter(NgramIndex(), DraftLength(self.tokens))
        drafter: Drafter = seq.drafter
        return drafter

    def settle(self, seq: Any, drafted: int, accepted: int) -> None:
        self.drafter(seq).settle(drafted, accepted)
        self.drafted += drafted
        self.accepted += accepted
        self.runs += 1

    def ended(self, seq: Any) -> None:
        """The sequence ended: log what its drafts gave."""
        drafter = seq.drafter
        if drafter is not None and drafter.runs:
            log.info(
                "speculation: %s drafted %d tokens, accepted %d, in %d verify runs",
                seq.job.id,
                drafter.drafted,
                drafter.accepted,
                drafter.runs,
            )


def accept(
    seq: Any,
    draft: list[int],
    logits: Any,
    take: Callable[[Any, Choice], bool],
    eos: frozenset[int],
) -> int:
    """Take the choice at each position of a verify run (``logits [1 + len(draft), vocab]``
    for the row's next token and ``draft`` fed after it) while it equals the draft token fed
    at the next position; returns how many draft tokens were accepted.

    Each choice is the sampler's own, made with the sequence's state as of the tokens taken
    before it (penalties, ``min_tokens``, the grammar, the seeded generator: one draw per
    token taken, as without speculation); ``take`` passes it on or ends the sequence with it
    (EOS, a stop string, ``max_tokens``), which ends the block there. ``seq.tokens`` then
    counts only the fed positions whose token was taken: the ones after them were computed
    from a rejected token, and the row's next run writes over them."""
    fed = [seq.next_token, *draft]
    accepted = 0
    for i, token in enumerate(fed):
        seq.tokens.append(token)
        seq.next_token = None
        [choice] = choose(np.asarray(logits[i : i + 1], dtype=np.float32), [seq.state], eos)
        if not take(seq, choice) or i == len(draft) or choice.token != draft[i]:
            break
        accepted += 1
    return accepted
