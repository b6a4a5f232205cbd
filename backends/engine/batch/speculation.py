"""N-gram (prompt-lookup) speculation: which decoding rows draft this step, how many
tokens, and taking the verified ones.

A drafting row feeds its next token and up to ``k`` drafted tokens in one run of its own:
onnxruntime's CPU GroupQueryAttention takes several new tokens over a past only at batch size
1 ("batch_size must be 1 when sequence_length > 1 and past context is given"), so such a row
leaves the batched decode run for a batch-1 run of ``1 + k`` tokens beside it. The strategy
then takes the choice at each position (the sampler's, with the sequence's state as of the
tokens accepted before it) while it equals the draft token fed there.

A row drafts when it pays, by what the runs cost on this machine, the delay its verify run
adds to every other row's step counted (:mod:`backends.engine.batch.speculation_policy`);
``p``, how often its draft tokens are taken, is the row's own acceptance so far (recent
verify runs weigh more, a new row starts at 0.7). So a copying row drafts long while few rows
decode, a row writing free text soon stops, and with many rows decoding only rows that copy
nearly every token draft. A row for which no draft pays even alone probes with one token now
and then (after 8 steps, then 16, ... up to 256), in case it starts copying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backends.engine.batch import speculation_policy as policy
from backends.engine.batch.ngram import NgramIndex
from backends.engine.batch.sampler import Choice, choose
from backends.types import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN, GenerationParams, Speculative

log = logging.getLogger("genai.batch")

PRIOR = (1.4, 2.0)  # a new row: 1.4 of 2 draft tokens taken (p = 0.7)
FORGET = 0.5  # each verify run, earlier evidence weighs half as much
PROBE_WAIT, MAX_WAIT = 8, 256  # steps between one-token probes of a row no draft pays for


@dataclass
class DraftLength:
    """How many tokens a row drafts next, from how its drafts fared."""

    most: int
    hits: float = PRIOR[0]
    judged: float = PRIOR[1]
    wait: int = 0  # steps before the next probe
    probes: int = 0  # probes missed in a row
    # best_draft by rows decoding, for the acceptance and the cost figures as they stand
    # (until the next settle or new figures): asked every step of every decoding row, and
    # most steps change neither.
    _best: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _version: int = field(default=-1, init=False, repr=False, compare=False)

    @property
    def acceptance(self) -> float:
        return self.hits / self.judged

    def wanted(self, rows: int, costs: policy.Costs) -> int:
        """Tokens to draft this step with ``rows`` rows decoding (0: none), at ``costs``."""
        if self._version != costs.version:
            self._best.clear()
            self._version = costs.version
        k = self._best.get(rows)
        if k is None:
            p = self.acceptance
            k = self._best[rows] = policy.best_draft(p, rows, self.most, costs.step, costs.verify)
        if k or rows > 1:
            return k
        if self.wait > 0:  # no draft pays even alone: probe now and then
            self.wait -= 1
            return 0
        self.wait = min(MAX_WAIT, PROBE_WAIT << self.probes)
        self.probes += 1
        return 1

    def settle(self, drafted: int, accepted: int) -> None:
        judged = accepted + (1 if accepted < drafted else 0)
        self.hits = FORGET * self.hits + accepted
        self.judged = FORGET * self.judged + judged
        self._best.clear()
        if accepted:
            self.probes = 0


@dataclass
class Drafter:
    """One sequence's lookup, draft length and counts."""

    index: NgramIndex
    length: DraftLength
    drafted: int = 0
    accepted: int = 0
    runs: int = 0
    # the verify run whose tokens are being taken: drafted, accepted so far (a token taken
    # may end the sequence before the run is settled, and the run counts in its usage)
    taking: tuple[int, int] | None = None

    def settle(self, drafted: int, accepted: int) -> None:
        self.length.settle(drafted, accepted)
        self.drafted += drafted
        self.accepted += accepted
        self.runs += 1
        self.taking = None

    def counts(self) -> tuple[int, int, int]:
        """Tokens drafted and accepted, and verify runs, the run being taken included."""
        if self.taking is None:
            return self.drafted, self.accepted, self.runs
        drafted, accepted = self.taking
        return self.drafted + drafted, self.accepted + accepted, self.runs + 1


@dataclass
class Speculation:
    """The engine's speculation settings (a request may override them: its
    ``params.speculative``) and its totals."""

    tokens: int  # most tokens a row drafts (its k); 0: no speculation
    lookup_min: int = PROMPT_LOOKUP_MIN
    lookup_max: int = PROMPT_LOOKUP_MAX
    drafted: int = 0
    accepted: int = 0
    runs: int = 0
    # what runs cost on this machine, as the strategy times them (speculation_policy.py)
    costs: policy.Costs = field(default_factory=policy.Costs)

    def settings(self, params: GenerationParams) -> Speculative:
        """A sequence's own: the server's, under the request's override."""
        server = Speculative(self.tokens, self.lookup_min, self.lookup_max)
        return params.speculative.over(server) if params.speculative is not None else server

    def drafts(
        self, rows: Sequence[Any], room: Callable[[Any], int]
    ) -> list[tuple[Any, list[int]]]:
        """The rows that draft this step and their drafts. ``rows`` are the sequences with a
        token to feed (``tokens``, ``next_token``, ``state``, ``job``), ``room(seq)`` how many
        tokens a row may draft at most (its budget and the context's end). Asked every step:
        a row that does not draft costs a lookup."""
        due = probe = bool(rows) and self.costs.probe_due()
        out = []
        for seq in rows:
            drafter = seq.drafter or self.drafter(seq)
            if drafter.length.most <= 0:
                continue
            k = drafter.length.wanted(len(rows), self.costs)
            if k <= 0 and probe and self._could_pay(drafter, len(rows)):
                k, probe = 1, False  # a cost probe: the verify figures go stale otherwise
            if (k := min(k, room(seq))) <= 0:
                continue
            drafter.index.sync(seq.tokens, seq.next_token)
            draft = drafter.index.propose(k)
            guide = seq.state.guide
            if draft and guide is not None and guide.constrains:
                draft = draft[: guide.validate(draft)]
            if draft:
                out.append((seq, draft))
        if out or due:  # a probe (or none of these rows would pay): the clock starts again
            self.costs.idle = 0
        return out

    def _could_pay(self, drafter: Drafter, rows: int) -> bool:
        """Whether a draft of the row's would pay were verify runs as cheap as a one-row
        step: only then is the verify runs' cost what keeps it from drafting."""
        p, costs = drafter.length.acceptance, self.costs
        return policy.best_draft(p, rows, drafter.length.most, costs.step, costs.cheap) > 0

    def drafter(self, seq: Any) -> Drafter:
        """The sequence's drafter, made on its first look (kept on it: ``seq.drafter``); one
        that drafts at most 0 tokens for a sequence without speculation."""
        if seq.drafter is None:
            own = self.settings(seq.job.params)
            assert own.tokens is not None and own.lookup_min and own.lookup_max
            index = NgramIndex(own.lookup_min, own.lookup_max)
            seq.drafter = Drafter(index, DraftLength(own.tokens))
        drafter: Drafter = seq.drafter
        return drafter

    def settle(self, seq: Any, drafted: int, accepted: int) -> None:
        self.drafter(seq).settle(drafted, accepted)
        self.drafted += drafted
        self.accepted += accepted
        self.runs += 1

    def ended(self, seq: Any) -> None:
        """The sequence ended: count what its drafts gave on its job (its usage), and log it."""
        if seq.drafter is None:
            return
        drafted, accepted, runs = seq.drafter.counts()
        if runs:
            job = seq.job
            job.drafted_tokens, job.accepted_tokens, job.verify_runs = drafted, accepted, runs
            log.info(
                "speculation: %s drafted %d tokens, accepted %d, in %d verify runs",
                job.id,
                drafted,
                accepted,
                runs,
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
        if seq.drafter is not None:  # if this token ends the sequence, its usage counts the run
            seq.drafter.taking = (len(draft), accepted)
        if not take(seq, choice) or i == len(draft) or choice.token != draft[i]:
            break
        accepted += 1
    return accepted
