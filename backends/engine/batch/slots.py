"""Which sequence lives in which row of the KV cache, and which finished rows stay resident.

A finished sequence keeps its row (its KV cache) in an LRU of at most ``keep`` rows. A new
prompt that continues a resident row (shares at least half of what the row holds: typically
the next turn of the same chat) takes that row and is prefilled only after the shared
length. Otherwise it gets the lowest free row, or, with none free, the least recently used
resident row. A prompt that merely shares the chat template's first tokens with another
conversation does not take that conversation's row while a free one is left.

The strategy keeps the busy rows at the bottom (the decode batch is the contiguous range of
rows up to the highest busy one): :meth:`exchange` records that a busy row's cache and an idle
row's (free or resident) swapped places.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from backends.engine.prefix_cache import common_prefix, reusable


class SlotTable:
    def __init__(self, slots: int, keep: int) -> None:
        self.keep = keep
        self._free = list(range(slots))
        self._resident: OrderedDict[int, list[int]] = OrderedDict()  # row -> tokens it holds

    def __len__(self) -> int:
        """Rows that hold a finished sequence."""
        return len(self._resident)

    def acquire(self, prompt: Sequence[int]) -> tuple[int, int]:
        """A row for ``prompt``, and how many of its first tokens that row already holds.

        At least ``MIN_FEED`` prompt tokens are always left to feed, so the model computes the
        logits of the first new token, the same way as without reuse."""
        best: tuple[int, int] | None = None
        for row, tokens in self._resident.items():
            shared = reusable(common_prefix(tokens, prompt), len(prompt))
            if 2 * shared >= len(tokens) and shared > 0 and (best is None or shared > best[1]):
                best = (row, shared)
        if best is not None:
            del self._resident[best[0]]
            return best
        if self._free:
            self._free.sort()
            return self._free.pop(0), 0
        row, tokens = self._resident.popitem(last=False)
        return row, reusable(common_prefix(tokens, prompt), len(prompt))  # whatever it shares

    def release(self, row: int, tokens: list[int] | None) -> None:
        """Give a row back; ``tokens`` (those its KV cache holds) keep it resident for reuse."""
        if tokens and self.keep > 0:
            self._resident[row] = tokens
            while len(self._resident) > self.keep:
                old, _ = self._resident.popitem(last=False)
                self._free.append(old)
        else:
            self._free.append(row)

    def exchange(self, busy: int, idle: int) -> None:
        """Rows ``busy`` and ``idle`` swapped contents: ``idle`` is busy now, and ``busy`` is
        what ``idle`` was (free, or resident with the same tokens and the same LRU rank)."""
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
