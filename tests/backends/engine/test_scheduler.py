"""The core on the real demo model (no HTTP): concurrency, reuse, limits, cancellation,
timeouts, stop strings and the sampling features applied on the owner thread."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.handle import ChoiceDelta, Result
from backends.core.request import ChatPrompt, GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.errors import (
    ContextLengthExceeded,
    InvalidRequest,
    Overloaded,
    RequestCancelled,
    RequestTimedOut,
    ShuttingDown,
)
from backends.types import SamplingParams
from schemas.settings import DEMO_MODEL_DIR
from tests.conftest import DEMO_CONTEXT

pytestmark = pytest.mark.model

STRATEGIES = ["generator", "engine", "batch"]
FULL = ["generator", "batch"]  # the strategies with the whole sampling surface
MODEL_FIELDS = ("scheduler", "cache_sequences", "prefill_chunk")
EOS = 2  # the demo model's eos_token_id


def config(**kw: Any) -> ServiceConfig:
    model = {k: kw.pop(k) for k in MODEL_FIELDS if k in kw}
    return ServiceConfig(
        ModelConfig(DEMO_MODEL_DIR, device="cpu", intra_op_threads=1, **model), Limits(**kw)
    )


def run(cfg: ServiceConfig, body: Callable[[InferenceService], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        service = InferenceService(cfg)
        await service.start()
        try:
            return await body(service)
        finally:
            await service.stop()

    return asyncio.run(main())


def request(prompt: Any, max_tokens: int | None = 16, **kw: Any) -> GenerationRequest:
    sampling = {k: kw.pop(k) for k in list(kw) if k in SamplingParams.__dataclass_fields__}
    if isinstance(prompt, str):
        prompt = TextPrompt(prompt)
    elif isinstance(prompt, list) and isinstance(prompt[0], dict):
        prompt = ChatPrompt(prompt)
    return GenerationRequest(prompt, SamplingParams(**sampling), max_tokens=max_tokens, **kw)


async def chat(service: InferenceService, messages, **kw: Any) -> Result:
    handle = await service.submit(request(messages, **kw))
    return await handle.result()


def text(result: Result) -> str:
    return result.choices[0].text


def user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


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
    cold1, cold2 = run(config(scheduler=strategy, cache_sequences=0), conversation)
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


@pytest.mark.parametrize("strategy", FULL)
def test_min_tokens_and_logit_bias_and_logprobs(strategy: str) -> None:
    async def body(service: InferenceService) -> tuple[Result, Result, list[ChoiceDelta]]:
        forced = await chat(service, user("hi"), max_tokens=5, logit_bias={65: 100.0})
        long = await chat(service, user("hi"), max_tokens=40, min_new_tokens=40)
        handle = await service.submit(
            request(user("hi"), max_tokens=4, logprobs=True, top_logprobs=3)
        )
        pieces = [p async for p in handle if p.token is not None]
        return forced, long, pieces

    forced, long, pieces = run(config(scheduler=strategy), body)
    assert forced.usage.completion_tokens == 5
    assert long.usage.completion_tokens == 40
    assert len(pieces) == 4
    for p in pieces:  # greedy: the chosen token is the most likely one
        assert p.token is not None and p.token.logprob is not None
        chosen = p.token.logprob
        assert chosen.logprob <= 0 and chosen.token_id == p.token.token_id
        assert len(p.token.top_logprobs) == 3
        assert p.token.top_logprobs[0].token_id == chosen.token_id
        assert p.token.top_logprobs[0].token == chosen.token
        assert p.token.top_logprobs[0].logprob == pytest.approx(chosen.logprob)


@pytest.mark.parametrize("strategy", FULL)
def test_logit_bias_forces_the_token(strategy: str, oracle) -> None:
    async def body(service: InferenceService) -> Result:
        return await chat(service, user("hi"), max_tokens=4, logit_bias={65: 100.0})

    result = run(config(scheduler=strategy), body)
    assert text(result) == oracle.tokenizer.decode(np.array([65, 65, 65, 65], dtype=np.int32))


@pytest.mark.parametrize("strategy", FULL)
def test_seeded_sampling_is_reproducible_and_choice_i_uses_seed_plus_i(strategy: str) -> None:
    async def body(service: InferenceService) -> tuple[list[str], list[str]]:
        singles = [
            text(await chat(service, user("hi"), max_tokens=12, temperature=1.0, seed=s))
            for s in (7, 7, 8)
        ]
        both = await chat(service, user("hi"), max_tokens=12, temperature=1.0, seed=7, n=2)
        return singles, [c.text for c in both.choices]

    (a, b, c), choices = run(config(scheduler=strategy), body)
    assert a == b
    assert a != c
    assert choices == [a, c]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_json_schema_guidance_produces_valid_json(strategy: str) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
        "x-guidance": {"whitespace_flexible": False},
    }

    async def body(service: InferenceService) -> Result:
        guidance = ("json_schema", json.dumps(schema))
        return await chat(service, user("json"), max_tokens=40, guidance=guidance)

    result = run(config(scheduler=strategy), body)
    assert isinstance(json.loads(text(result))["ok"], bool)


def test_engine_refuses_what_it_cannot_honour() -> None:
    async def body(service: InferenceService) -> list[tuple[str | None, str]]:
        refused = []
        for sampling in (
            {"logit_bias": {5: 1.0}},
            {"logprobs": True},
            {"presence_penalty": 1.0},
            {"seed": 3, "temperature": 1.0},
        ):
            with pytest.raises(InvalidRequest) as exc:
                await service.submit(request(user("hi"), max_tokens=4, **sampling))
            refused.append((exc.value.param, exc.value.message))
        ok = await chat(
            service,
            user("hi"),
            max_tokens=6,
            min_new_tokens=6,
            temperature=0.8,
            top_k=5,
            top_p=0.9,
            repetition_penalty=1.2,
        )
        assert ok.usage.completion_tokens == 6
        assert service.stats().requests == ()  # refused requests left nothing behind
        return refused

    refused = run(config(scheduler="engine"), body)
    assert [p for p, _ in refused] == ["logit_bias", "logprobs", "presence_penalty", "seed"]
    assert all("not supported by the 'engine' scheduler" in m for _, m in refused)


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


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("cache", [0, 4])
def test_min_tokens_holds_eos_back_exactly(strategy: str, cache: int) -> None:
    async def body(service: InferenceService) -> list[Result]:
        out = []
        for prompt, n in (("first prompt", 5), ("first prompt", 3), ("other", 7), ("first", 0)):
            bias = {EOS: 100.0} if strategy != "engine" else None
            out.append(
                await chat(service, user(prompt), max_tokens=12, min_new_tokens=n, logit_bias=bias)
            )
        return out

    results = run(config(scheduler=strategy, cache_sequences=cache), body)
    if strategy != "engine":  # EOS is forced by the bias: output ends exactly at min_tokens
        assert [r.usage.completion_tokens for r in results] == [5, 3, 7, 0]
        assert all(r.choices[0].finish_reason == "stop" for r in results)
    else:
        assert all(
            r.usage.completion_tokens >= n for r, n in zip(results, (5, 3, 7, 0), strict=True)
        )


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
