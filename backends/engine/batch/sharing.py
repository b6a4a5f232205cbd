"""Prefix sharing across sessions: a new prompt's longest shared prefix is copied, not
recomputed, from whichever row holds it (a busy row or a resident one) or restored from the
host-RAM prefix store.

Only positions a row's KV really holds are copied (a busy row's tokens so far, a resident
row's tokens), and only its *exact* ones: those prefilled from prompt tokens, with nothing
decoded before them (:mod:`backends.engine.batch.slots`). A source row is only read: it
keeps its own history. Sharing starts at ``share_min`` tokens (a chat template's first
tokens alone are not worth a copy); 0 turns it off. At least ``MIN_FEED`` prompt tokens are
always fed (:func:`backends.engine.prefix_cache.reusable`), so the first new token's logits
are computed the same way as without sharing.

A copy is the very bytes the source row holds, and prefilled positions are the same bytes
however the prompt was chunked (two or more tokens a step): a copy reads as a cold prefill
would, so sharing never changes an output (tests/backends/engine/batch/test_sharing.py checks
this against og.Generator on every architecture).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from backends.engine.batch.kv_cache import KVCache
from backends.engine.batch.prefix_store import PrefixStore
from backends.engine.batch.slots import SlotTable, shared_length
from backends.engine.prefix_cache import reusable

# Shortest shared prefix copied from another row or restored from the store, in tokens.
SHARE_MIN = 32


class PrefixSharing:
    def __init__(
        self,
        kv: KVCache,
        slots: SlotTable,
        store: PrefixStore | None = None,
        share_min: int = SHARE_MIN,
    ) -> None:
        self.kv = kv
        self.store = store
        self.share_min = share_min
        if store is not None:
            slots.on_evict = self._keep

    def _keep(self, row: int, tokens: list[int]) -> None:
        """A resident row is given up: its full blocks go to the store."""
        assert self.store is not None
        self.store.put(tokens, lambda lo, hi: self.kv.read(row, lo, hi))

    def extend(
        self,
        row: int,
        prompt: Sequence[int],
        held: int,
        rows: Iterable[tuple[int, Sequence[int]]],
        *,
        exact: int | None = None,
        count: bool = True,
    ) -> int:
        """Fill ``row`` (which holds ``prompt[:held]``, the first ``exact`` of them exact;
        all, if not given) with the longest prefix of ``prompt`` that another of ``rows``
        (row, tokens of its exact positions) or the store holds, if longer and at least
        ``share_min``; returns how many prompt tokens the row holds now. Only positions past
        the exact ones are written: exact positions are the same bytes wherever they come
        from. ``count``: a store miss counts (a newcomer's first look, not the later ones)."""
        if self.share_min <= 0:
            return held
        start = held if exact is None else min(held, exact)
        source, best = None, held
        for other, tokens in rows:
            n = reusable(shared_length(tokens, prompt), len(prompt))
            if other != row and n > best:
                source, best = other, n
        if self.store is not None and len(prompt) >= self.store.block_tokens:
            restored = self._restore(row, prompt, best, start)
            if restored:
                return restored
            if count:
                self.store.stats.misses += 1
        if source is None or best < self.share_min:
            return held
        self.kv.copy(source, row, start, best)
        return best

    def _restore(self, row: int, prompt: Sequence[int], better_than: int, start: int) -> int:
        assert self.store is not None
        size = self.store.block_tokens
        keys = self.store.match(prompt)
        n = reusable(len(keys) * size, len(prompt))
        if n <= better_than or n < self.share_min:
            return 0
        first = start // size
        blocks = self.store.take(keys[: math.ceil(n / size)])
        for i, block in enumerate(blocks[first:], start=first):
            self.kv.write(row, i * size, block[:, :, :, : n - i * size])
        self.store.stats.hits += 1
        self.store.stats.restored_tokens += n - start
        return n
