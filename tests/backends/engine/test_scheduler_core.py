"""The core on the real demo model (no HTTP), the one core for every strategy: stop strings, n
choices, admission all-or-nothing, and a request no server could take."""

from __future__ import annotations

import asyncio
import time

import pytest

from backends.core.handle import Result
from backends.core.request import GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.errors import (
    ContextLengthExceeded,
    InvalidRequest,
)
from tests.backends.engine.helpers import FULL, STRATEGIES, config, request, run, text
from tests.conftest import DEMO_CONTEXT

pytestmark = pytest.mark.model


# ---- the one core: stops, n, admission all-or-nothing ------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_stop_string_ends_the_sequence_at_its_token(strategy: str, oracle) -> None:
    # A chat prompt: the demo model's answer to it runs for some tokens before its turn ends.
    prompt = oracle.chat_prompt([{"role": "user", "content": "Write a short story about a bird."}])
    expected, tokens = oracle.greedy(prompt, 30)
    pieces = [oracle.tokenizer.decode([t]) for t in tokens]
    k = next(i for i in range(3, len(pieces)) if pieces[i].strip() and pieces[i] in expected)
    stop = pieces[k]
    cut = expected.find(stop)
    # The token that completes the first occurrence of the stop string is the last one made.
    made = next(i + 1 for i in range(len(pieces)) if stop in "".join(pieces[: i + 1]))

    async def body(service: InferenceService) -> Result:
        handle = await service.submit(request(prompt, max_tokens=30, stop=[stop]))
        return await handle.result()

    result = run(config(scheduler=strategy), body)
    assert text(result) == expected[:cut]
    assert result.choices[0].finish_reason == "stop"
    assert result.usage.completion_tokens == made  # counted exactly, nothing generated after


def test_n_choices_of_several_prompts_merge_in_one_handle(oracle) -> None:
    prompts = ["Once upon a time", "The river"]
    expected, tokens = zip(*(oracle.greedy(p, 6) for p in prompts), strict=True)

    async def body(service: InferenceService) -> Result:
        req = GenerationRequest([TextPrompt(p) for p in prompts], max_tokens=6, n=2)
        return await (await service.submit(req)).result()

    result = run(config(cache_sequences=0), body)
    assert [c.index for c in result.choices] == [0, 1, 2, 3]
    assert [c.text for c in result.choices] == [expected[0]] * 2 + [expected[1]] * 2
    assert result.usage.prompt_tokens == sum(len(oracle.tokenizer.encode(p)) for p in prompts)
    made = 2 * sum(len(t) for t in tokens)  # 6 each, unless the model ended its turn first
    assert result.usage.completion_tokens == made
    assert result.metrics.output_tokens == made


def test_a_refused_prompt_queues_none_of_the_request() -> None:
    async def body(service: InferenceService) -> None:
        too_long = "river " * (DEMO_CONTEXT + 100)
        req = GenerationRequest([TextPrompt("fine"), TextPrompt(too_long)], max_tokens=4)
        with pytest.raises(ContextLengthExceeded) as exc:
            await service.submit(req)
        assert exc.value.param == "prompt"
        assert service.stats().requests == ()
        with pytest.raises(InvalidRequest) as bad:
            await service.submit(request("fine", logit_bias={10**6: 1.0}))
        assert bad.value.param == "logit_bias"
        assert service.stats().requests == ()

    run(config(), body)


def test_a_submit_cancelled_in_flight_leaves_nothing_behind() -> None:
    async def body(service: InferenceService) -> None:
        task = asyncio.create_task(service.submit(request("river", max_tokens=1500)))
        await asyncio.sleep(0)  # the request is on its way to the owner thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 30  # the owner thread may still be admitting it
        while service.stats().requests and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert service.stats().requests == ()

    run(config(), body)


@pytest.mark.parametrize("strategy", FULL)
def test_many_choices_of_one_request_do_not_starve_the_next(strategy: str) -> None:
    async def body(service: InferenceService) -> list[str]:
        order: list[str] = []

        async def watch(name: str, handle) -> None:
            async for piece in handle:
                if piece.finish_reason is not None:
                    order.append(f"{name}{piece.index}")

        big = await service.submit(request("river", max_tokens=60, min_new_tokens=60, n=6))
        small = await service.submit(request("city", max_tokens=5, min_new_tokens=5))
        await asyncio.gather(watch("big", big), watch("small", small))
        return order

    order = run(config(scheduler=strategy, max_concurrency=2, cache_sequences=0), body)
    # Two slots: big0 and big1 start; when one ends, the small request (running none) goes
    # before big2..big5, though they came first.
    assert order.index("small0") < order.index("big3")


def test_a_request_no_server_could_take_is_a_400_not_a_429() -> None:
    async def body(service: InferenceService) -> InvalidRequest:
        with pytest.raises(InvalidRequest) as exc:
            await service.submit(request("river", max_tokens=2, n=4))
        return exc.value

    error = run(config(max_concurrency=1, max_queue=2), body)
    assert error.param == "n" and "at most 3" in error.message


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_owner_threads_time_in_steps_is_counted(strategy: str) -> None:
    async def body(service: InferenceService) -> None:
        before = service.stats().engine
        assert before is not None
        result = await (await service.submit(request("the river", max_tokens=12))).result()
        tokens = result.usage.completion_tokens
        # The last token reaches the handle during its step; the step is counted when it
        # returns, a moment later on the owner thread.
        deadline = time.monotonic() + 10
        while (after := service.stats().engine) is not None and time.monotonic() < deadline:
            if after.steps - before.steps >= tokens:
                break
            await asyncio.sleep(0.01)
        assert after is not None
        # Without speculation a step gives a sequence one token at most.
        assert after.steps - before.steps >= result.usage.completion_tokens > 0
        spent = after.cpu_seconds - before.cpu_seconds
        assert 0 < spent <= after.busy_seconds - before.busy_seconds + 0.01

    run(config(scheduler=strategy, speculative_tokens=0), body)
