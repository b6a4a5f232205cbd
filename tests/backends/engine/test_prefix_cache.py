from __future__ import annotations

import pytest

from backends.engine.prefix_cache import (
    MIN_FEED,
    Held,
    PrefixCache,
    chunk_length,
    common_prefix,
    reusable,
)

pytestmark = pytest.mark.unit


def held(tokens, key="k", capacity=100, state="s") -> Held[str]:
    return Held(key, list(tokens), capacity, state)


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2, 3]) == 2


def test_take_prefers_longest_prefix_and_removes_it() -> None:
    cache: PrefixCache[str] = PrefixCache(4)
    cache.put(held([1, 2, 9], state="short"))
    cache.put(held([1, 2, 3, 4], state="long"))
    got = cache.take("k", [1, 2, 3, 4, 5, 6], needed=10)
    assert got is not None and got[0].state == "long" and got[1] == 4
    assert len(cache) == 1


def test_two_prompt_tokens_are_always_left_to_feed() -> None:
    cache: PrefixCache[str] = PrefixCache(4)
    cache.put(held([1, 2, 3, 4]))
    got = cache.take("k", [1, 2, 3, 4], needed=3)
    assert got is not None and got[1] == 2
    cache.put(held([1, 2, 3, 4]))
    got = cache.take("k", [1, 2, 3, 4, 5], needed=3)  # one new token: one cached one re-fed
    assert got is not None and got[1] == 3


def test_reusable_leaves_two_tokens_but_never_goes_negative() -> None:
    assert [reusable(9, n) for n in (0, 1, 2, 3, 10, 20)] == [0, 0, 0, 1, 8, 9]


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 16])
@pytest.mark.parametrize("pending", range(1, 40))
def test_prefill_chunks_never_leave_a_token_alone(pending: int, chunk: int) -> None:
    steps = []
    left = pending
    while left:
        n = chunk_length(left, chunk)
        assert 0 < n <= max(chunk, MIN_FEED + 1)
        steps.append(n)
        left -= n
    assert sum(steps) == pending
    assert pending == 1 or all(n >= MIN_FEED for n in steps), steps
    if chunk >= 4:
        assert len(steps) == -(-pending // chunk)  # never an extra step


def test_key_capacity_and_min_match_are_respected() -> None:
    cache: PrefixCache[str] = PrefixCache(4, min_match=2)
    cache.put(held([1, 2, 3], key="greedy"))
    assert cache.take("sampled", [1, 2, 3, 4], needed=5) is None
    assert cache.take("greedy", [1, 2, 3, 4], needed=500) is None
    assert cache.take("greedy", [1, 7], needed=5) is None
    assert cache.take("greedy", [1, 2, 3, 4], needed=5) is not None


def test_lru_eviction_calls_back() -> None:
    evicted: list[str] = []
    cache: PrefixCache[str] = PrefixCache(2, on_evict=evicted.append)
    for name in ("a", "b", "c"):
        cache.put(held([1], state=name))
    assert evicted == ["a"] and len(cache) == 2
    cache.clear()
    assert evicted == ["a", "b", "c"]


def test_size_zero_disables() -> None:
    evicted: list[str] = []
    cache: PrefixCache[str] = PrefixCache(0, on_evict=evicted.append)
    cache.put(held([1, 2]))
    assert len(cache) == 0 and evicted == ["s"]


def test_full_cache_recycles_the_oldest_compatible_state() -> None:
    cache: PrefixCache[str] = PrefixCache(2, min_match=1)
    cache.put(held([1, 2], state="old"))
    assert cache.take("k", [9, 9, 9], needed=5) is None  # not full: allocate instead
    cache.put(held([3, 4], state="new"))
    got = cache.take("k", [9, 9, 9], needed=5)
    assert got is not None and got[0].state == "old" and got[1] == 0
    assert cache.take("other", [9, 9], needed=5) is None


def test_reuse_capacity() -> None:
    from backends.engine.prefix_cache import reuse_capacity

    assert reuse_capacity(100, 8192) == 1280
    assert reuse_capacity(7500, 8192) == 8192
    assert reuse_capacity(100, 512) == 512


def test_a_state_that_cannot_rewind_is_reused_from_its_end_only() -> None:
    cache: PrefixCache[str] = PrefixCache(1)
    cache.put(Held("k", [1, 2, 3, 4], 100, "slid", rewinds=False))
    assert cache.take("k", [1, 2, 3, 9, 9], needed=10) is None  # a shorter prefix: no
    assert cache.take("k", [7, 7, 7], needed=10) is None  # nor recycled, though the cache is full
    got = cache.take("k", [1, 2, 3, 4, 5, 6], needed=10)  # it goes on from all its tokens
    assert got is not None and got[0].state == "slid" and got[1] == 4
