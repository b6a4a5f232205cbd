"""Prefix sharing across sessions and the host-RAM prefix store, on every decoder architecture
the builder makes, against a plain og.Generator loop: greedy output equal token for token (on
int4 models up to near-ties: tests/backends/engine/oracle_margins.py) with sharing off, with
copies from busy rows (a newcomer arrives while its source decodes), from resident rows and
from the store; and a session's history survives another session's newcomer while a free row
exists."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest

from backends.core.service import InferenceService
from metrics.prometheus import ServerMetrics
from tests.backends.engine.batch.test_architectures import MODELS, WORDS
from tests.backends.engine.batch.test_strategy import batch_config
from tests.backends.engine.helpers import request, run, text, user
from tests.backends.engine.oracle_margins import STOP, GreedyOracle, assert_near_tie
from tests.conftest import metric

pytestmark = pytest.mark.model

N = 120  # tokens each answer has (EOS held back: the sources stay busy that long, also while
# a newcomer's prefill runs beside their decode steps and the next prompt is on its way)
Settings = dict[str, Any]
OFF: Settings = {"prefix_share_min": 0, "cache_sequences": 0}
BUSY_ROWS: Settings = {"prefix_share_min": 32, "cache_sequences": 0, "prefix_store_mib": 0}
RESIDENT_ROWS: Settings = {"prefix_share_min": 32, "cache_sequences": 4, "prefix_store_mib": 0}
STORE: Settings = {"prefix_share_min": 32, "cache_sequences": 0, "prefix_store_mib": 16}


def tokenizes_back(oracle: GreedyOracle, prompt: str, answer: list[int]) -> str:
    """The longest start of ``answer`` that, after ``prompt``, tokenizes back to the tokens
    generated (a prompt continuing with it shares the first row's decoded positions)."""
    ids, kept = oracle.encode(prompt), ""
    for k in range(1, len(answer)):
        start = oracle.tokenizer.decode(np.asarray(answer[:k], dtype=np.int32))
        if oracle.encode(prompt + start) == ids + answer[:k]:
            kept = start
    return kept


async def _collect(service: InferenceService, prompt: str, started: asyncio.Event) -> Any:
    handle = await service.submit(request(prompt, max_tokens=N, min_new_tokens=N))
    ids = []
    async for delta in handle:
        if delta.token is not None:
            ids.append(delta.token.token_id)
            started.set()
        if delta.finish_reason == "stop" and delta.stop_sequence is None:
            ids.append(STOP)
    started.set()
    return ids, handle.usage().cached_tokens


async def staggered(service: InferenceService, prompts: list[str]) -> list[tuple[list[int], int]]:
    """Each prompt is submitted once the one before has its first token: it arrives while the
    rows ahead of it are decoding."""
    tasks = []
    for prompt in prompts:
        started = asyncio.Event()
        tasks.append(asyncio.create_task(_collect(service, prompt, started)))
        await started.wait()
    return list(await asyncio.gather(*tasks))


async def together(service: InferenceService, prompts: list[str]) -> list[tuple[list[int], int]]:
    """All at once: each newcomer waits while the one ahead reads the shared prefix (32-token
    chunks) and copies, step by step, what that one has read so far."""
    events = [asyncio.Event() for _ in prompts]
    runs = (_collect(service, p, e) for p, e in zip(prompts, events, strict=True))
    return list(await asyncio.gather(*runs))


async def one_by_one(service: InferenceService, prompts: list[str]) -> list[tuple[list[int], int]]:
    return [await _collect(service, p, asyncio.Event()) for p in prompts]


def shared_prompts(arch: str) -> list[str]:
    """Three sessions with one long system prompt (past a 64-token sliding window)."""
    rng = random.Random(arch)
    system = " ".join(rng.choice(WORDS) for _ in range(90))
    asks = [" ".join(rng.choice(WORDS) for _ in range(k)) for k in (5, 12, 30)]
    return [f"{system}\nQ: {ask}\nA:" for ask in asks]


@pytest.mark.parametrize("arch", sorted(MODELS))
def test_sharing_and_the_store_never_change_greedy_output(arch: str) -> None:
    folder = MODELS[arch]
    oracle = GreedyOracle(folder)
    prompts = shared_prompts(arch)
    lengths = [len(oracle.encode(p)) for p in prompts]
    assert min(lengths) > 100  # the shared part crosses the sliding window
    follows = [oracle.follow(p, N, min_new=N) for p in prompts]
    # A fourth session continues the first one's conversation, with as much of its answer as
    # tokenizes back to what it generated: positions the first row wrote while decoding are
    # not copied to it (they differ from a prefill: docs/prefix-sharing.md), its prompt's are.
    kept = tokenizes_back(oracle, prompts[0], [s.token for s in follows[0](())])
    prompts.append(f"{prompts[0]}{kept}\nQ: why?\nA:")
    follows.append(oracle.follow(prompts[3], N, min_new=N))
    decoded = len(oracle.encode(prompts[0] + kept)) - lengths[0]

    def check(settings: dict[str, Any], body: Any) -> list[int]:
        got = run(batch_config(folder, prefill_chunk=32, **settings), lambda s: body(s, prompts))
        for row, ((ids, _), follow) in enumerate(zip(got, follows, strict=True)):
            assert_near_tie(ids, follow, oracle.tolerance, label=f"{settings}, row {row}")
        return [cached for _, cached in got]

    assert check(OFF, staggered) == [0, 0, 0, 0]
    busy = check(BUSY_ROWS, staggered)  # copies from rows still decoding
    assert busy[0] == 0 and min(busy[1:]) >= 90, busy
    prefilling = check(BUSY_ROWS, together)  # copies from a row still prefilling
    assert prefilling[0] == 0 and min(prefilling[1:]) >= 90, prefilling
    resident = check(RESIDENT_ROWS, one_by_one)  # copies from finished rows
    assert min(resident[1:]) >= 90, resident
    stored = check(STORE, one_by_one)  # every row given up at its end: restored from the store
    assert stored[0] == 0 and min(stored[1:]) >= 64, stored
    assert max(busy[3], stored[3]) <= lengths[0], (busy, stored)
    if arch == "demo":  # the trained answer tokenizes back nearly whole, random ones barely
        assert decoded > N // 2


def test_a_history_survives_another_session_s_newcomer_while_a_row_is_free() -> None:
    system = "You are a helpful assistant. " + "Answer in short sentences about nature. " * 12
    chat_a = [{"role": "system", "content": system}, *user("tell me about the river")]

    async def body(service: InferenceService) -> tuple[int, int, int]:
        first = await (await service.submit(request(chat_a, max_tokens=8))).result()
        # Another session, same system prompt: a copy of the prefix, in a free row.
        other = await (await service.submit(request([chat_a[0], *user("and birds?")]))).result()
        history = [*chat_a, {"role": "assistant", "content": text(first)}, *user("and fish?")]
        second = await (await service.submit(request(history, max_tokens=8))).result()
        return other.usage.cached_tokens, first.usage.prompt_tokens, second.usage.cached_tokens

    settings = {**RESIDENT_ROWS, "max_concurrency": 4}
    shared, first_prompt, reused = run(batch_config(**settings), body)
    assert shared >= 64
    # A's next turn found all of A's row (its prompt and more): it was not taken.
    assert reused > first_prompt


def test_store_metrics_move() -> None:
    prompt = user("the river and the mountain and the city " * 12)
    metrics = ServerMetrics()

    async def body(service: InferenceService) -> None:
        metrics.attach(service)
        for _ in range(2):
            await (await service.submit(request(prompt, max_tokens=4))).result()

    run(batch_config(**STORE), body)
    page = metrics.exposition().decode()
    assert metric(page, "genai_prefix_store_hits_total") == 1
    assert metric(page, "genai_prefix_store_misses_total") == 1
    assert metric(page, "genai_prefix_store_restored_tokens_total") >= 64
    assert metric(page, "genai_prefix_store_bytes") > 0
    assert metric(page, "genai_prefix_store_capacity_bytes") == 16 * 1024 * 1024
    assert "genai_prefix_store_evictions_total" in page
