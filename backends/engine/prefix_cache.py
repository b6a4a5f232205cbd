"""Held sequences for prefix reuse: an LRU of (token ids, engine state) with prefix matching.

A finished chat turn's KV cache stays resident; a later prompt that shares a long prefix with
it (typically the next turn of the same conversation) prefills only the tokens after it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Generic, TypeVar

from backends.types import GenerationParams, Speculative

S = TypeVar("S")


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# Prompt tokens are always fed at least two at a time (but for a one-token prompt). A step of
# one new token takes other kernels than a step of several: on the benchmark's int4 model
# (int8 activations) the next token's logits moved by up to 1.1 (std 4.8) when a prompt's
# last token was fed alone after the rest instead of with it, while any split into steps of
# two or more gave the very same logits (and decode rows agree whatever the batch size). So a
# prompt reads the same whether it is prefilled whole, in chunks or after a reused prefix.
MIN_FEED = 2


def reusable(shared: int, prompt_length: int) -> int:
    """How much of a ``shared`` prefix to reuse: at most all but ``MIN_FEED`` prompt tokens."""
    return max(0, min(shared, prompt_length - MIN_FEED))


def chunk_length(pending: int, chunk: int) -> int:
    """How many of ``pending`` prompt tokens the next prefill step feeds (at most ``chunk``,
    but never fewer than ``MIN_FEED``), never leaving a single one for a step of its own."""
    n = min(pending, max(chunk, MIN_FEED))
    if pending - n == 1:  # one would be left alone: feed one less now, or all of them
        n = n - 1 if n > MIN_FEED else pending
    return n


@dataclass
class Held(Generic[S]):
    key: Hashable  # what must match for the state to be reusable (e.g. search options)
    tokens: list[int]  # token ids whose KV the state holds, in order
    capacity: int  # total tokens the state can hold
    state: S
    min_length: int = 0  # the state suppresses EOS until the sequence is this long
    # False: the state goes on from its end only. og.Generator rewinds a sliding-window KV
    # cache to no position at all once it has dropped one (not even to one it still holds).
    rewinds: bool = True


class PrefixCache(Generic[S]):
    """At most ``size`` held states; ``take`` removes and returns the best match."""

    def __init__(
        self, size: int, *, min_match: int = 1, on_evict: Callable[[S], None] | None = None
    ):
        self.size = size
        self.min_match = min_match
        self._on_evict = on_evict
        self._items: OrderedDict[int, Held[S]] = OrderedDict()
        self._ids = count()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, held: Held[S]) -> None:
        if self.size <= 0:
            self._evict(held)
            return
        self._items[next(self._ids)] = held
        while len(self._items) > self.size:
            _, old = self._items.popitem(last=False)
            self._evict(old)

    def take(
        self, key: Hashable, prompt: Sequence[int], needed: int, max_min_length: int = 0
    ) -> tuple[Held[S], int] | None:
        """The held state sharing the longest prefix with ``prompt`` (at least ``MIN_FEED``
        prompt tokens are left to feed, so the engine computes fresh logits, the same way as
        without reuse), if it fits ``needed`` tokens.

        With no useful match and the cache full, the least recently used compatible state is
        handed out for recycling (shared prefix 0): it would be evicted by the next ``put``
        anyway, and reusing it saves allocating a new KV cache. A state whose own EOS
        suppression (``min_length``) outlasts ``max_min_length`` is never handed out, nor one
        that cannot rewind (``rewinds``) unless the prompt goes on from all its tokens."""
        best: tuple[int, int] | None = None
        oldest: int | None = None
        for item_id, held in self._items.items():
            if held.key != key or held.capacity < needed or held.min_length > max_min_length:
                continue
            n = reusable(common_prefix(held.tokens, prompt), len(prompt))
            if not held.rewinds and n < len(held.tokens):
                continue
            if oldest is None:
                oldest = item_id
            if n >= self.min_match and (best is None or n > best[1]):
                best = (item_id, n)
        if best is None and oldest is not None and len(self._items) >= self.size:
            best = (oldest, 0)
        if best is None:
            return None
        return self._items.pop(best[0]), best[1]

    def states(self) -> list[S]:
        return [held.state for held in self._items.values()]

    def clear(self) -> None:
        while self._items:
            self._evict(self._items.popitem(last=False)[1])

    def _evict(self, held: Held[S]) -> None:
        if self._on_evict is not None:
            self._on_evict(held.state)


# ---- what a held og.Generator may be reused for (the generator strategy) -------------------
# Room left for a later turn in a reusable sequence. The KV cache is allocated for the whole
# capacity when the Generator is made (measured: ~15 ms for 300 tokens, ~350 ms for 8192 on
# a 135M model), so reusable sequences get this much headroom, not the whole context.
REUSE_HEADROOM = 1024


def reuse_capacity(needed: int, max_length: int) -> int:
    rounded = -(-(needed + REUSE_HEADROOM) // 256) * 256
    return min(max_length, rounded)


def reuse_key(params: GenerationParams, speculative: Speculative | None = None) -> Hashable | None:
    """Search and speculative options and the adapter are fixed when a Generator is made:
    reuse only an identical setup (so a prefix is never shared across adapters, or with the
    base model)."""
    if params.seed is not None or params.guidance is not None:
        return None
    spec = (speculative.tokens, speculative.lookup_max) if speculative else None
    if params.greedy:
        return ("greedy", params.adapter, params.repetition_penalty, spec)
    return (
        "sample",
        params.adapter,
        params.temperature,
        params.top_p,
        params.top_k,
        params.min_p,
        params.repetition_penalty,
        spec,
    )


def images_end(prompt: list[int], image_token: int | None) -> int:
    """How many prompt tokens a reused state must share to have read every image: up to the
    last image token (one past it); the whole prompt when the image token is not known."""
    if image_token is None:
        return len(prompt)
    return 1 + max((i for i, t in enumerate(prompt) if t == image_token), default=-1)
