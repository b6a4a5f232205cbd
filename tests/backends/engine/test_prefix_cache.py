from __future__ import annotations

import pytest

from backends.engine.prefix_cache import Held, PrefixCache, common_prefix

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
    got = cache.take("k", [1, 2, 3, 4, 5], needed=10)
    assert got is not None and got[0].state == "long" and got[1] == 4
    assert len(cache) == 1


def test_one_prompt_token_is_always_left_to_feed() -> None:
    cache: PrefixCache[str] = PrefixCache(4)
    cache.put(held([1, 2, 3]))
    got = cache.take("k", [1, 2, 3], needed=3)
    assert got is not None and got[1] == 2


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
    from backends.engine.generator import reuse_capacity

    assert reuse_capacity(100, 8192) == 1280
    assert reuse_capacity(7500, 8192) == 8192
    assert reuse_capacity(100, 512) == 512
