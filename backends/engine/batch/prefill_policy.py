"""Where a newcomer's prompt is read while other rows decode (``prefill_overlap="auto"``):
in the step, on all the threads, or beside the decode steps (the overlapped prefill), chosen
from what the runs themselves cost on this machine.

Read in the step, a prompt stalls every decoding row for as long as the read takes. Read
beside them (a second session, half the threads each side), it stalls nobody; but whether
two half-thread runs side by side get more done than full-thread runs one after the other
depends on the machine: on an AMD EPYC (2 vCPUs) they did, on an Intel Xeon (2 vCPUs) the
overlap cost 12-14% of the throughput under load and two thirds more time to first token.
So, per prompt:

- one whose read would stall the rows for at most ``stall`` decode steps is read in the step,
  whole: its first token comes sooner and no thread is split;
- a longer one is read beside the decode steps while that pays: a side-by-side stretch of
  time T reads the prompt (what takes P on all threads) and does T / d' decode steps (what
  take T·d / d' on all threads), so it pays when T·(1 - d / d') < P;
- where it does not pay, it is read in the step in chunks that stall the rows for at most
  ``stall`` decode steps each.

The costs are moving averages over the runs: seconds per prompt token read alone (P / L) and
beside decode steps (T / L), seconds per decode step alone (d) and beside a read (d'). Until
a read alone and a decode step alone have been seen, long prompts overlap; while
overlapping does not pay, every ``probe``-th chunk overlaps anyway, a stall-sized one, so the
averages follow the machine at the cost of a short read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

ALPHA = 0.25  # weight of the newest run in a moving average
STALL = 1.5  # decode steps' worth of time one step may spend reading a prompt
PROBE = 8  # while overlapping does not pay, one chunk in this many overlaps anyway


@dataclass
class Average:
    """An exponentially weighted moving average; None until the first value."""

    value: float | None = None

    def add(self, x: float) -> None:
        self.value = x if self.value is None else self.value + ALPHA * (x - self.value)


class Read(NamedTuple):
    """Where a newcomer's next prompt chunk is read, and at most how many tokens."""

    tokens: int
    beside: bool  # on the worker thread beside the decode steps, else in this step


@dataclass
class PrefillPolicy:
    stall: float = STALL
    probe: int = PROBE
    min_chunk: int = 16
    read: Average = field(default_factory=Average)  # s per prompt token, in the step
    read_beside: Average = field(default_factory=Average)  # s per token, beside decode steps
    step: Average = field(default_factory=Average)  # s per decode step, nothing beside it
    step_beside: Average = field(default_factory=Average)  # s per decode step beside a read
    _declined: int = 0

    def __str__(self) -> str:
        """The figures the rule reads, in milliseconds, for the debug log."""

        def ms(average: Average) -> str:
            return "-" if average.value is None else f"{average.value * 1e3:.2f}"

        return (
            f"prompt token {ms(self.read)} alone, {ms(self.read_beside)} beside; "
            f"decode step {ms(self.step)} alone, {ms(self.step_beside)} beside; "
            f"overlap pays: {self.overlap_pays()}"
        )

    def prefilled(self, tokens: int, seconds: float, *, beside: bool) -> None:
        """A prompt chunk of ``tokens`` was read in ``seconds`` (``beside`` decode steps)."""
        if tokens > 0:
            (self.read_beside if beside else self.read).add(seconds / tokens)

    def decoded(self, seconds: float, *, beside: bool) -> None:
        (self.step_beside if beside else self.step).add(seconds)

    def overlap_pays(self) -> bool | None:
        """Whether reading beside the decode steps got more done than in them; None until
        both ways have been seen."""
        p, p2, d, d2 = (a.value for a in (self.read, self.read_beside, self.step, self.step_beside))
        if p is None or p2 is None or d is None or d2 is None:
            return None
        return p2 * (1.0 - d / d2) < p

    def plan(self, pending: int) -> Read:
        """How to read a newcomer's ``pending`` prompt tokens while rows decode."""
        p, d = self.read.value, self.step.value
        if p is None or d is None:
            return Read(pending, beside=True)  # nothing to go by yet: stall nobody
        budget = max(self.min_chunk, int(self.stall * d / p))
        if pending <= budget:
            return Read(pending, beside=False)
        if self.overlap_pays() is not False:
            return Read(pending, beside=True)
        self._declined += 1
        return Read(budget, beside=self._declined % self.probe == 0)
