"""Which sequence lives in which row of the KV cache, and which finished rows stay resident.

A finished sequence keeps its row (its KV cache) in an LRU of at most ``keep`` rows. A new
prompt that continues a resident row exactly (it starts with every token the row holds:
the next turn of the same chat) takes that row and is prefilled only after them. Otherwise
it gets the lowest free row, or, with none free, the least recently used resident row (not
the one sharing most with the prompt while another can go: it copies from that one). So a
session's history is never taken by another session's newcomer while a free row is left; a
prompt that merely shares a prefix with another row (a common system prompt) gets a copy of
that prefix instead (:mod:`backends.engine.batch.sharing`).

Each row also records how many of its first positions are *exact*: written by prefilling
prompt tokens, with no position written by a decode step before them, so that they hold what a
cold prefill of those tokens would write, bit for bit. Only those are shared with other
sessions (:meth:`shareable`) or reported when the row is given up: on int4 models with int8
activations a position written by a one-token decode step differs from the same token
prefilled by far more than the last bits (docs/prefix-sharing.md). A session's own next turn
still continues its row in place, decoded positions included, as it always has.

A resident row given up (taken for a newcomer, or beyond ``keep``) is reported to
``on_evict`` first, while its KV is still intact (the host-RAM prefix store keeps it).

The strategy keeps the busy rows at the bottom (the decode batch is the contiguous range of
rows up to the highest busy one): :meth:`exchange` records that a busy row's cache and an idle
row's (free or resident) swapped places.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from backends.engine.prefix_cache import reusable

Evicted = Callable[[int, list[int]], None]  # (row, the tokens its KV holds)


def shared_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many first tokens ``a`` and ``b`` share (compared a slice at a time, in C)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, step = 0, 256
    while a[lo : lo + step] == b[lo : lo + step]:
        lo += step
    while a[lo] == b[lo]:
        lo += 1
    return lo


class SlotTable:
    def __init__(self, slots: int, keep: int, on_evict: Evicted | None = None) -> None:
        self.keep = keep
        self.on_evict = on_evict
        self._free = list(range(slots))
        self._resident: OrderedDict[int, list[int]] = OrderedDict()  # row -> tokens it holds
        self._exact: dict[int, int] = {}  # row -> its exact positions (see above)

    def __len__(self) -> int:
        """Rows that hold a finished sequence."""
        return len(self._resident)

    def acquire(self, prompt: Sequence[int]) -> tuple[int, int]:
        """A row for ``prompt``, and how many of its first tokens that row already holds.

        At least ``MIN_FEED`` prompt tokens are always left to feed, so the model computes the
        logits of the first new token, the same way as without reuse."""
        best: tuple[int, int] | None = None
        for row, tokens in self._resident.items():
            if shared_length(tokens, prompt) < len(tokens):
                continue  # not a continuation: it may be copied from, never taken
            shared = reusable(len(tokens), len(prompt))
            if shared > 0 and (best is None or shared > best[1]):
                best = (row, shared)
        if best is not None:
            del self._resident[best[0]]
            return best
        if self._free:
            self._free.sort()
            return self._free.pop(0), 0
        # Another conversation's row: whatever it shares, of its exact positions only. The
        # least recently used row goes, unless it is the one sharing most with the prompt
        # (a copy source, likely for the next sessions too) and another can go instead.
        shares = [
            (row, min(reusable(shared_length(tokens, prompt), len(prompt)), self.exact(row)))
            for row, tokens in self._resident.items()
        ]
        source = max(shares, key=lambda share: share[1])
        row, shared = next((s for s in shares if s[0] != source[0] or not s[1]), source)
        self._give_up(row, self._resident.pop(row))
        return row, shared

    def release(self, row: int, tokens: list[int] | None, exact: int | None = None) -> None:
        """Give a row back; ``tokens`` (those its KV cache holds) keep it resident for reuse.
        ``exact``: how many of them are exact (all, if not given)."""
        self._exact[row] = 0 if not tokens else len(tokens) if exact is None else exact
        if tokens and self.keep > 0:
            self._resident[row] = tokens
            while len(self._resident) > self.keep:
                old, held = self._resident.popitem(last=False)
                self._give_up(old, held)
                self._free.append(old)
        else:
            if tokens:
                self._give_up(row, tokens)
            self._free.append(row)

    def _give_up(self, row: int, tokens: list[int]) -> None:
        if self.on_evict is not None:
            self.on_evict(row, tokens[: self.exact(row)])

    def exact(self, row: int) -> int:
        """How many of the first positions the row held when last released are exact."""
        return self._exact.get(row, 0)

    def shareable(self) -> list[tuple[int, list[int]]]:
        """The resident rows and the tokens of their exact positions, least recent first."""
        return [(row, tokens[: self.exact(row)]) for row, tokens in self._resident.items()]

    def exchange(self, busy: int, idle: int) -> None:
        """Rows ``busy`` and ``idle`` swapped contents: ``idle`` is busy now, and ``busy`` is
        what ``idle`` was (free, or resident with the same tokens and the same LRU rank)."""
        self._exact[busy] = self._exact.pop(idle, 0)
        if idle in self._resident:
            self._resident = OrderedDict(
                (busy if row == idle else row, tokens) for row, tokens in self._resident.items()
            )
        else:
            self._free.remove(idle)
            self._free.append(busy)

    def resident(self, row: int) -> list[int] | None:
        """The tokens a resident row holds (None for a free or busy row)."""
        return self._resident.get(row)
