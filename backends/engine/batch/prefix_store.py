"""A bounded host-RAM store of KV blocks, content-addressed by a hash chain.

When the slot table gives up a resident row (a newcomer needs it, or more rows are resident
than it keeps), the row's keys and values go here instead of being lost. They are cut into
blocks of ``block_tokens`` tokens; block ``i`` is keyed by ``hash(key of block i-1, its
tokens)``, as vLLM's automatic prefix caching keys its blocks, so a key names the block's
tokens *and* everything before them, and equal prefixes of different rows share their blocks.
A later prompt walks its own chain and restores the longest run of stored blocks into its row.

Every hit is checked against the stored tokens and parent key, so a hash collision can never
hand out another prefix's KV. Blocks are kept in LRU order within ``capacity_bytes``; each
use touches a chain from its tail to its root, so a parent is always more recent than its
children and eviction takes the tails first (a child without its parent is unreachable).
Only full blocks are kept: the last partial block of a row is recomputed when needed.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from backends.types import KV_BLOCK_TOKENS, PrefixStoreStats

BLOCK_TOKENS = KV_BLOCK_TOKENS


@dataclass(frozen=True)
class _Block:
    parent: bytes
    tokens: tuple[int, ...]
    kv: np.ndarray  # [layers, 2, kv_heads, block_tokens, head_size]


ROOT = b""  # the parent key of a prompt's first block


class Listener(Protocol):
    """Told of every block the store adds and drops (the KV events' ledger)."""

    def stored(self, key: bytes, parent: bytes, tokens: tuple[int, ...]) -> None: ...

    def evicted(self, key: bytes) -> None: ...


def block_keys(
    tokens: Sequence[int], block_tokens: int, first: int = 0, parent: bytes = ROOT
) -> list[bytes]:
    """The hash chain of ``tokens``' full blocks: one key per block, each over its parent's;
    from block ``first`` on, whose parent's key is ``parent``."""
    keys = []
    start, stop = first * block_tokens, len(tokens) // block_tokens * block_tokens
    data = np.asarray(tokens[start:stop], dtype="<i8").tobytes()  # one conversion, then slices
    size = 8 * block_tokens
    for lo in range(0, len(data), size):
        parent = hashlib.blake2b(parent + data[lo : lo + size], digest_size=16).digest()
        keys.append(parent)
    return keys


class PrefixStore:
    def __init__(
        self,
        capacity_bytes: int,
        bytes_per_token: int,
        *,
        block_tokens: int = BLOCK_TOKENS,
        stats: PrefixStoreStats | None = None,
        listener: Listener | None = None,
    ) -> None:
        self.listener = listener
        self.capacity_bytes = capacity_bytes
        self.block_tokens = block_tokens
        self.block_bytes = block_tokens * bytes_per_token
        self.stats = stats if stats is not None else PrefixStoreStats()
        self.stats.capacity_bytes = capacity_bytes
        self._blocks: OrderedDict[bytes, _Block] = OrderedDict()  # least recent first

    def __len__(self) -> int:
        return len(self._blocks)

    @property
    def nbytes(self) -> int:
        return self.stats.bytes

    def put(self, tokens: Sequence[int], read: Callable[[int, int], np.ndarray]) -> int:
        """Keep the full blocks of ``tokens`` not held yet; ``read(lo, hi)`` gives the KV of
        positions ``[lo, hi)``. Returns how many blocks were added."""
        fit = self.capacity_bytes // self.block_bytes
        keys = block_keys(tokens, self.block_tokens)[:fit]  # a chain never evicts its own root
        self._touch([key for key in keys if key in self._blocks])  # the chain's go last
        added, parent = 0, ROOT
        for i, key in enumerate(keys):
            if key not in self._blocks:
                lo = i * self.block_tokens
                kv = read(lo, lo + self.block_tokens)
                held = tuple(tokens[lo : lo + self.block_tokens])
                self._evict(kv.nbytes)  # room first: the bound holds at every step
                self._blocks[key] = _Block(parent, held, kv)
                self.stats.bytes += kv.nbytes
                added += 1
                if self.listener is not None:
                    self.listener.stored(key, parent, held)
            parent = key
        self._touch(keys)
        self.stats.blocks = len(self._blocks)
        return added

    def match(self, tokens: Sequence[int]) -> list[bytes]:
        """The keys of the longest run of stored blocks ``tokens`` starts with (untouched)."""
        found, parent = [], ROOT
        for i, key in enumerate(block_keys(tokens, self.block_tokens)):
            block = self._blocks.get(key)
            lo = i * self.block_tokens
            if (
                block is None
                or block.parent != parent
                or block.tokens != tuple(tokens[lo : lo + self.block_tokens])
            ):
                break
            found.append(key)
            parent = key
        return found

    def take(self, keys: list[bytes]) -> list[np.ndarray]:
        """The KV of blocks ``keys`` (from :meth:`match`), in order; a use for the LRU."""
        self._touch(keys)
        return [self._blocks[key].kv for key in keys]

    def _touch(self, keys: list[bytes]) -> None:
        for key in reversed(keys):  # the root ends up most recent: tails are evicted first
            self._blocks.move_to_end(key)

    def _evict(self, room: int) -> None:
        """Least recent first, until ``room`` more bytes fit the bound."""
        while self.stats.bytes + room > self.capacity_bytes and self._blocks:
            key, block = self._blocks.popitem(last=False)
            self.stats.bytes -= block.kv.nbytes
            self.stats.evictions += 1
            if self.listener is not None:
                self.listener.evicted(key)
