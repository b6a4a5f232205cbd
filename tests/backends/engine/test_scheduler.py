"""The core on the real demo model (no HTTP): concurrency, reuse, limits, cancellation and
timeouts. The sampling features applied on the owner thread are in
test_scheduler_sampling.py; stops, n and admission in test_scheduler_core.py."""

from __future__ import annotations

import asyncio

import pytest

from backends.core.handle import ChoiceDelta, Result
from backends.core.request import GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.errors import (
    Overloaded,
    RequestCancelled,
    RequestTimedOut,
    ShuttingDown,
)
from tests.backends.engine.helpers import STRATEGIES, chat, config, request, run, text, user

pytestmark = pytest.mark.model


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_concurrent_greedy_streams_equal_solo_runs(strategy: str) -> None:
    prompts = [user(f"question number {i} about rivers") for i in range(8)]

    async def body(service: InferenceService) -> tuple[list[str], list[str]]:
        solo = [text(await chat(service, p, max_tokens=20)) for p in prompts]
        together = await asyncio.gather(*(chat(service, p, max_tokens=20) for p in prompts))
        return solo, [text(c) for c in together]

    solo, together = run(config(scheduler=strategy, cache_sequences=0), body)
    assert len(set(solo)) > 1, "prompts should give different outputs for a meaningful test"
    assert together == solo


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_second_turn_reuses_the_first_and_matches_a_cold_run(strategy: str) -> None:
    turn1 = user("tell me about the mountain and the river " * 8)

    async def conversation(service: InferenceService) -> tuple[Result, Result]:
        first = await chat(service, turn1, max_tokens=12)
        history = [*turn1, {"role": "assistant", "content": text(first)}]
        second = await chat(service, [*history, *user("and the city?")], max_tokens=12)
        return first, second

    warm1, warm2 = run(config(scheduler=strategy, cache_sequences=4), conversation)
    # Cold: nothing kept, nothing shared (batch would restore turn 1's prompt from its store).
    cold = config(scheduler=strategy, cache_sequences=0, prefix_share_min=0)
    cold1, cold2 = run(cold, conversation)
    assert warm1.usage.cached_tokens == 0
    assert cold2.usage.cached_tokens == 0
    if strategy != "engine":
        assert warm2.usage.cached_tokens > len(turn1[0]["content"]) // 8
    else:
        # A static-batching Engine (every CPU model) keeps no prefix cache and cannot continue
        # a request while others are resident; reuse there needs dynamic batching (CUDA).
        assert warm2.usage.cached_tokens == 0
    assert (text(warm1), text(warm2)) == (text(cold1), text(cold2))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_queue_full_is_refused(strategy: str) -> None:
    async def body(service: InferenceService) -> None:
        # One request of 3 choices fills running (1) + waiting (2), in one trip.
        handle = await service.submit(
            request(user("hi"), max_tokens=1900, n=3, min_new_tokens=1900)
        )
        with pytest.raises(Overloaded) as exc:
            await service.submit(request(user("hi"), max_tokens=1))
        assert exc.value.headers["Retry-After"]
        assert service.stats().running + service.stats().waiting == 3
        handle.cancel()
        result = await handle.result()
        assert [c.finish_reason for c in result.choices] == ["cancelled"] * 3
        await (await service.submit(request(user("hi"), max_tokens=1))).result()

    run(config(scheduler=strategy, max_concurrency=1, max_queue=2), body)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_choice_with_a_token_is_running_never_waiting(strategy: str) -> None:
    async def body(service: InferenceService) -> None:
        # One slot, three choices: one runs, two wait, and each runs in turn.
        handle = await service.submit(request(user("hi"), max_tokens=6, min_new_tokens=6, n=3))
        seen_running: set[str] = set()
        async for _ in handle:
            stats = service.stats()
            assert stats.running + stats.waiting == len(stats.requests)
            assert stats.running <= 1
            for r in stats.requests:
                assert r.state == "running" or r.generated_tokens == 0, r
                if r.state == "running":
                    seen_running.add(r.id)
        assert len(seen_running) == 3
        assert service.stats().requests == ()

    run(config(scheduler=strategy, max_concurrency=1), body)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cancel_stops_generation_and_frees_the_slot(strategy: str) -> None:
    async def body(service: InferenceService) -> None:
        handle = await service.submit(request(user("hi"), max_tokens=1500, min_new_tokens=1500))
        seen: list[ChoiceDelta] = []
        async for piece in handle:
            seen.append(piece)
            if len(seen) == 1:  # the owner thread waits for the loop after a first token
                handle.cancel()
        assert seen[-1].finish_reason == "cancelled"
        assert handle.usage().completion_tokens < 1500
        assert handle.usage().completion_tokens == sum(p.token is not None for p in seen)
        # The stats are read where the finish arrived: no waiting for the owner thread.
        assert (service.stats().running, service.stats().requests) == (0, ())

    run(config(scheduler=strategy), body)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_request_timeout_is_raised_not_passed_off_as_a_finish(strategy: str) -> None:
    async def body(service: InferenceService) -> int:
        handle = await service.submit(request(user("hi"), max_tokens=1900, min_new_tokens=1900))
        with pytest.raises(RequestTimedOut, match="GENAI_REQUEST_TIMEOUT"):
            await handle.result()
        return handle.usage().completion_tokens

    assert run(config(scheduler=strategy, request_timeout=0.05), body) < 1900


def test_a_request_deadline_overrides_the_server_timeout() -> None:
    async def body(service: InferenceService) -> tuple[int, int, int]:
        past = GenerationRequest(TextPrompt("river"), max_tokens=50, deadline=0.0)
        handle = await service.submit(past)
        with pytest.raises(RequestTimedOut, match="after 0 of its tokens"):
            await handle.result()
        usage = handle.usage()
        return usage.completion_tokens, usage.prompt_tokens, handle.metrics().input_tokens

    made, prompt_tokens, input_tokens = run(config(), body)
    assert made == 0
    # The metrics were frozen at once, yet they know the prompt.
    assert input_tokens == prompt_tokens > 0


@pytest.mark.parametrize("cause", ["admin", "shutdown"])
def test_an_end_the_server_imposes_is_raised_naming_it(cause: str) -> None:
    async def body(service: InferenceService) -> type[Exception]:
        handle = await service.submit(request(user("hi"), max_tokens=1900, min_new_tokens=1900))
        pieces = aiter(handle)
        await anext(pieces)
        if cause == "admin":
            assert service.cancel(handle.choices[0].id)
        else:
            await service.drain(timeout=0)
        with pytest.raises((RequestCancelled, ShuttingDown)) as exc:
            async for _ in pieces:
                pass
        return type(exc.value)

    expected = RequestCancelled if cause == "admin" else ShuttingDown
    assert run(config(), body) is expected


def test_recycled_generator_gives_the_same_output_as_a_fresh_one() -> None:
    async def body(service: InferenceService) -> list[Result]:
        out = []
        for prompt in ("alpha beta gamma", "7 + 8 = 15 and more"):  # no shared first token
            out.append(await (await service.submit(request(prompt, max_tokens=10))).result())
        return out

    warm = run(config(cache_sequences=1), body)  # the 2nd prompt recycles the 1st's generator
    cold = run(config(cache_sequences=0), body)
    assert [text(c) for c in warm] == [text(c) for c in cold]
    assert warm[1].usage.cached_tokens == 0
