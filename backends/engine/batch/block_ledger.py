"""Which full blocks of exact prompt tokens the batch engine's KV cache holds, told as KV
events (:mod:`backends.engine.kv_events`) for the gateway's prefix-aware routing.

Two tiers, as vLLM tells its own cache from its offload:

- **GPU**: the rows, busy and resident. A row holds the blocks of its exact positions (those a
  newcomer may copy: :mod:`backends.engine.batch.slots`); a block several rows hold is stored
  once and removed when the last of them lets it go.
- **CPU**: the host-RAM prefix store, told as it adds and evicts blocks.

Blocks are the prefix store's: ``block_tokens`` tokens keyed by its hash chain, so a row's and
the store's copies of one prefix have the same key. An event names a block by the key's first
8 bytes, as an unsigned int. Each tier holds whole prefixes (a row holds its prompt from the
start; the store evicts tails first), so a block's parent is always one already told.

The strategy tells the ledger what its rows hold after each step and :meth:`flush` sends what
changed since the last flush: a block given up and taken again in between is never told.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from backends.engine.batch.prefix_store import ROOT, block_keys
from backends.engine.batch.slots import shared_length
from backends.engine.kv_events import (
    CPU,
    GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventSink,
)


def block_hash(key: bytes) -> int:
    """The hash an event carries for a block key (never 0, which the router reads as none)."""
    return int.from_bytes(key[:8], "big") or 1


class _Tier:
    def __init__(self, medium: str, block_tokens: int) -> None:
        self.medium = medium
        self.block_tokens = block_tokens
        self.holders: Counter[bytes] = Counter()
        self.blocks: dict[bytes, tuple[bytes, tuple[int, ...]]] = {}  # key -> parent, tokens
        self.told: set[bytes] = set()  # what the subscribers believe is held
        self.changed: dict[bytes, None] = {}  # since the last flush, in the order of change

    def hold(self, key: bytes, parent: bytes, tokens: tuple[int, ...]) -> None:
        self.holders[key] += 1
        self.blocks[key] = (parent, tokens)
        self.changed.setdefault(key)

    def release(self, key: bytes) -> None:
        self.holders[key] -= 1
        if self.holders[key] <= 0:
            del self.holders[key]
        self.changed.setdefault(key)

    def events(self) -> list[KVEvent]:
        changed = list(self.changed)
        self.changed.clear()
        gone = [k for k in changed if k not in self.holders and k in self.told]
        new = [k for k in changed if k in self.holders and k not in self.told]
        self.told.difference_update(gone)
        events: list[KVEvent] = []
        if gone:
            events.append(BlockRemoved(tuple(block_hash(k) for k in gone), self.medium))
        events += self._stored(new)
        for key in changed:
            if key not in self.holders:
                self.blocks.pop(key, None)
        return events

    def _stored(self, new: list[bytes]) -> list[KVEvent]:
        """``new`` as BlockStored events, parents before children; a run of blocks each the
        child of the one before is one event."""
        events: list[KVEvent] = []
        left = new
        while left:
            later = []
            run: list[bytes] = []
            for key in left:
                parent = self.blocks[key][0]
                if run and parent == run[-1]:
                    run.append(key)
                elif parent == ROOT or parent in self.told:
                    events += self._event(run)
                    run = [key]
                else:
                    later.append(key)  # its parent is told further on
                self.told.update(run)
            events += self._event(run)
            if len(later) == len(left):
                break  # no parent will come: a whole prefix is always held, so never here
            left = later
        return events

    def _event(self, run: list[bytes]) -> list[KVEvent]:
        if not run:
            return []
        parent = self.blocks[run[0]][0]
        tokens = tuple(t for key in run for t in self.blocks[key][1])
        return [
            BlockStored(
                tuple(block_hash(k) for k in run),
                None if parent == ROOT else block_hash(parent),
                tokens,
                self.block_tokens,
                self.medium,
            )
        ]


class BlockLedger:
    def __init__(self, block_tokens: int, sink: KVEventSink) -> None:
        self.block_tokens = block_tokens
        self.sink = sink
        self._gpu = _Tier(GPU, block_tokens)
        self._cpu = _Tier(CPU, block_tokens)
        self._rows: dict[int, tuple[list[int], list[bytes]]] = {}  # tokens its keys cover, keys

    # ---- the rows ------------------------------------------------------------------------
    def rows(self, held: Iterable[tuple[int, list[int]]]) -> None:
        """What every row holds now (the tokens of its exact positions); rows not named hold
        nothing."""
        now = dict(held)
        for row in [r for r in self._rows if r not in now]:
            for key in self._rows.pop(row)[1]:
                self._gpu.release(key)
        for row, tokens in now.items():
            self._row(row, tokens)

    def _row(self, row: int, tokens: list[int]) -> None:
        size = self.block_tokens
        covered, keys = self._rows.get(row, ([], []))
        blocks = len(tokens) // size
        if blocks == len(keys) and tokens[: blocks * size] == covered:
            return  # the usual step: nothing new in this row
        same = min(shared_length(covered, tokens) // size, blocks)
        for key in keys[same:]:
            self._gpu.release(key)
        keys = keys[:same]
        parent = keys[-1] if keys else ROOT
        for i, key in enumerate(block_keys(tokens, size, same, parent), start=same):
            self._gpu.hold(key, parent, tuple(tokens[i * size : (i + 1) * size]))
            keys.append(key)
            parent = key
        self._rows[row] = (list(tokens[: blocks * size]), keys)

    # ---- the prefix store (its Listener) ---------------------------------------------------
    def stored(self, key: bytes, parent: bytes, tokens: tuple[int, ...]) -> None:
        self._cpu.hold(key, parent, tokens)

    def evicted(self, key: bytes) -> None:
        self._cpu.release(key)

    # ---- telling -------------------------------------------------------------------------
    def flush(self) -> None:
        """Send what changed since the last flush."""
        self.sink(self._gpu.events() + self._cpu.events())

    def clear(self) -> None:
        """Everything is gone (the model is unloaded): one AllBlocksCleared."""
        self._gpu = _Tier(GPU, self.block_tokens)
        self._cpu = _Tier(CPU, self.block_tokens)
        self._rows.clear()
        self.sink([AllBlocksCleared()])
