"""Whether a decoding row drafts this step, and how many tokens: chosen from what the runs
themselves cost on this machine (:mod:`backends.engine.batch.speculation` runs the drafts).

A drafting row feeds its next token and ``k`` drafted tokens in a batch-1 run of its own
(onnxruntime's CPU GroupQueryAttention takes several new tokens over a past only at batch
size 1), after the batched decode run of the step, on the same threads: every row of the step
waits for it. With ``B`` rows decoding, a batched step takes ``T(B)`` and gives each row one
token: ``B / T(B)`` tokens a second. If one row drafts ``k`` tokens, each taken with
probability ``p``, its verify run takes ``V(k)`` and yields ``E(k, p) = (1 - p^(k+1)) / (1 - p)``
tokens (the one after the last taken draft token included) where the step would have given
it one. The batched run keeps its width (a drafting row below the top rides along as a dummy),
so the step now takes ``T(B) + V(k)`` for ``B - 1 + E`` tokens, and the draft pays when

    (B - 1 + E) / (T(B) + V(k)) > B / T(B)   <=>   E - 1 > B · V(k) / T(B):

the tokens the draft gains for its row must outweigh the tokens all ``B`` rows would have made,
at the batched pace, in the time the verify run holds them up. Alone (``B = 1``) the batched run
goes, and it reads ``E / V(k) > 1 / T(1)``. Of the ``k`` up to the bound the row drafts the one
that gives the step the most tokens a second, if any pays. Each row is weighed against a step
in which no other row drafts; where several do, each one's verify run holds up the others too,
which the rule counts for every one of them, so it errs on the side of drafting less.

So a row drafts while a verify run is cheap beside a batched step: alone, from ``p`` ≈ 0.33
where ``V(k) ≈ (1 + k/3) T(1)``; with 8 rows decoding, only a row whose drafts are nearly always
taken; and where a run of ``1 + k`` tokens costs as much as ``1 + k`` one-token steps (a kernel
slow at several positions), no row, since ``E`` never exceeds ``1 + k``.

The costs are moving averages of the runs the strategy times (nothing else on the threads:
no prefill chunk beside them): seconds per batched decode step by its rows, ``T(B)``, and per
verify run as ``V(k) = V(1) · q(k)``, a scale that follows the machine's load and a shape that
belongs to the kernel, each fed by every verify run. Until a run has been timed the figures are
the ones measured once on an AMD EPYC (``VERIFY_COST``, ``SHARE``), in units of a one-row
step, scaled by whatever has been timed; the rule reads a copy refreshed every ``REFRESH``
timed runs (and at the first of each kind). While no row drafts, ``V(1)`` would grow stale; so
after ``PROBE_STEPS`` decode steps without a verify run, one row for which a draft would pay
were verify runs as cheap as a one-row step drafts one token anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from backends.engine.batch.prefill_policy import Average

# The figures until runs are timed, in one-row steps. A verify run of 1 + k tokens costs
# 1 + VERIFY_COST * k one-row steps (T(1 + k) / T(1) was 1.43, 1.73, 2.08, 2.54, 2.79, 3.17,
# 3.34, 3.65 for k = 1..8 on the 135M shape, AMD EPYC, shared).
VERIFY_COST = 1 / 3
# A decode step of B rows (index B) costs B * SHARE[B] one-row steps, the same measurement;
# beyond the table, its last value.
SHARE = (1.0, 1.0, 0.68, 0.72, 0.54, 0.52, 0.51, 0.49, 0.46)
REFRESH = 16  # timed runs between two copies of the figures the rule reads
PROBE_STEPS = 128  # decode steps without a verify run before a cost probe


def prior_step(rows: int) -> float:
    return rows * SHARE[min(rows, len(SHARE) - 1)]


def prior_verify(k: int) -> float:
    return 1.0 + VERIFY_COST * k


def expected_tokens(k: int, p: float) -> float:
    """Tokens a verify run of ``k`` drafted tokens yields (the one after the last taken
    draft token included) if each is taken with probability ``p``."""
    return float(k + 1) if p >= 1.0 else (1.0 - p ** (k + 1)) / (1.0 - p)


def best_draft(
    p: float, rows: int, most: int, step: Callable[[int], float], verify: Callable[[int], float]
) -> int:
    """The draft length, up to ``most``, that gives a step of ``rows`` decoding rows the most
    tokens a second (``step(B)``: a batched step's time, ``verify(k)``: a verify run's), if that
    beats not drafting; else 0."""
    whole = step(rows)
    rest = whole if rows > 1 else 0.0  # the batched run, without the row if it was alone
    best, rate = 0, rows / whole
    for k in range(1, most + 1):
        k_rate = (rows - 1 + expected_tokens(k, p)) / (rest + verify(k))
        if k_rate > rate:
            best, rate = k, k_rate
    return best


@dataclass
class Costs:
    """What a batched decode step (by rows) and a verify run (by drafted tokens) cost here,
    as the strategy timed them; ``version`` changes when the figures the rule reads do."""

    steps: dict[int, Average] = field(default_factory=dict)  # s per batched step, by rows
    scale: Average = field(default_factory=Average)  # V(1), s
    shape: dict[int, Average] = field(default_factory=dict)  # q(k) = V(k) / V(1), k > 1
    version: int = 0
    idle: int = 0  # decode steps since the last verify run
    _timed: int = 0
    _step: dict[int, float] = field(default_factory=dict, repr=False)  # the copy the rule reads
    _verify: dict[int, float] = field(default_factory=dict, repr=False)

    def stepped(self, rows: int, seconds: float) -> None:
        """A batched decode step of ``rows`` rows took ``seconds``."""
        average = self.steps.get(rows)
        if average is None:
            average = self.steps[rows] = Average()
            self._timed = -1  # a new kind of run: the rule reads it at once
        average.add(seconds)
        self._tick()

    def verified(self, k: int, seconds: float) -> None:
        """A verify run of ``1 + k`` tokens took ``seconds``."""
        self.idle = 0
        scale, shape = self.scale, self.shape.get(k)
        if k <= 1:
            self._timed = -1 if scale.value is None else self._timed
            scale.add(seconds)
        elif scale.value is None or shape is None:  # the first of its kind: the rule reads it
            self._timed = -1
            if scale.value is None:
                scale.add(seconds / self._shape(k))
            assert scale.value is not None
            self.shape[k] = Average(seconds / scale.value)
        else:
            scale.add(seconds / self._shape(k))
            assert scale.value is not None
            shape.add(seconds / scale.value)
        self._tick()

    def _tick(self) -> None:
        self._timed += 1
        if self._timed % REFRESH == 0:
            self.version += 1
            self._step.clear()
            self._verify.clear()

    def probe_due(self) -> bool:
        """One more decode step: whether verify runs' figures want a fresh one (a probe)."""
        self.idle += 1
        return self.idle > PROBE_STEPS

    def _shape(self, k: int) -> float:
        q = self.shape.get(k)
        if q is None or q.value is None:
            return prior_verify(k) / prior_verify(1)
        return q.value

    def _unit(self) -> float:
        """A one-row step's time, from the nearest row count timed (1.0 before any)."""
        nearest = self._nearest(1)
        if nearest is None:
            if self.scale.value is not None:
                return self.scale.value / prior_verify(1)
            return 1.0
        near, value = nearest
        return value / prior_step(near)

    def _nearest(self, rows: int) -> tuple[int, float] | None:
        """The timed row count nearest ``rows`` (the fewer of two as near) and its time."""
        timed = {b: a.value for b, a in self.steps.items() if a.value is not None}
        if not timed:
            return None
        near = min(timed, key=lambda b: (abs(b - rows), b))
        return near, timed[near]

    def step(self, rows: int) -> float:
        """A batched decode step of ``rows`` rows: timed, else scaled from the nearest row
        count timed by the prior's shape."""
        if rows <= 0:
            return 0.0
        cached = self._step.get(rows)
        if cached is None:
            nearest = self._nearest(rows)
            if nearest is not None:
                near, value = nearest
                cached = value * prior_step(rows) / prior_step(near)
            else:
                cached = self._unit() * prior_step(rows)
            self._step[rows] = cached
        return cached

    def verify(self, k: int) -> float:
        """A verify run of ``1 + k`` tokens: V(1) · q(k), each timed or from the prior."""
        cached = self._verify.get(k)
        if cached is None:
            scale = self.scale.value
            if scale is None:
                scale = self._unit() * prior_verify(1)
            cached = self._verify[k] = scale * (1.0 if k <= 1 else self._shape(k))
        return cached

    def cheap(self, k: int) -> float:
        """A verify run as cheap as a one-row step: whether a draft could pay at all."""
        return self.step(1)
