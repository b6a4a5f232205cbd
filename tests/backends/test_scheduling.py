"""The scheduler and service on the real demo model (no HTTP): concurrency, reuse, limits,
cancellation, timeouts and the sampling features applied on the owner thread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from backends.errors import InvalidRequest, Overloaded
from backends.runtime import RuntimeConfig
from backends.service import Completion, InferenceService, ServiceConfig
from metrics.timing import RequestTimer
from schemas.settings import DEMO_MODEL_DIR

STRATEGIES = ["generator", "engine"]


def config(**kw: Any) -> ServiceConfig:
    runtime = RuntimeConfig(DEMO_MODEL_DIR, "cpu", intra_op_threads=1, max_length=None)
    return ServiceConfig(runtime=runtime, **kw)


def run(cfg: ServiceConfig, body: Callable[[InferenceService], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        service = InferenceService(cfg)
        await service.start()
        try:
            return await body(service)
        finally:
            await service.stop()

    return asyncio.run(main())


async def chat(service: InferenceService, messages, **sampling: Any) -> Completion:
    prompt = await service.prepare_chat(messages)
    max_tokens = sampling.pop("max_tokens", 16)
    params = service.plan(prompt, max_tokens=max_tokens, **sampling)
    return await service.complete(service.generate(prompt, params, RequestTimer()))


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_concurrent_greedy_streams_equal_solo_runs(strategy: str) -> None:
    prompts = [user(f"question number {i} about rivers") for i in range(8)]

    async def body(service: InferenceService) -> tuple[list[str], list[str]]:
        solo = [(await chat(service, p, max_tokens=20)).text for p in prompts]
        together = await asyncio.gather(*(chat(service, p, max_tokens=20) for p in prompts))
        return solo, [c.text for c in together]

    solo, together = run(config(scheduler=strategy, cache_sequences=0), body)
    assert len(set(solo)) > 1, "prompts should give different outputs for a meaningful test"
    assert together == solo


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_second_turn_reuses_the_first_and_matches_a_cold_run(strategy: str) -> None:
    turn1 = user("tell me about the mountain and the river " * 8)

    async def conversation(service: InferenceService) -> tuple[Completion, Completion]:
        first = await chat(service, turn1, max_tokens=12)
        history = [*turn1, {"role": "assistant", "content": first.text}]
        second = await chat(service, [*history, *user("and the city?")], max_tokens=12)
        return first, second

    warm1, warm2 = run(config(scheduler=strategy, cache_sequences=4), conversation)
    cold1, cold2 = run(config(scheduler=strategy, cache_sequences=0), conversation)
    assert warm1.finish.usage.cached_tokens == 0
    assert cold2.finish.usage.cached_tokens == 0
    if strategy == "generator":
        assert warm2.finish.usage.cached_tokens > len(turn1[0]["content"]) // 8
    else:
        # A static-batching Engine (every CPU model) keeps no prefix cache and cannot continue
        # a request while others are resident; reuse there needs dynamic batching (CUDA).
        assert warm2.finish.usage.cached_tokens == 0
    assert (warm1.text, warm2.text) == (cold1.text, cold2.text)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_queue_full_is_refused(strategy: str) -> None:
    async def body(service: InferenceService) -> None:
        prompt = await service.prepare_chat(user("hi"))
        params = service.plan(prompt, max_tokens=200, min_new_tokens=200)
        gens = [service.generate(prompt, params, RequestTimer()) for _ in range(3)]
        with pytest.raises(Overloaded) as exc:
            service.generate(prompt, params, RequestTimer())
        assert exc.value.headers["Retry-After"]
        for g in gens:
            g.cancel()
        results = [await service.complete(g) for g in gens]
        assert all(r.finish.reason == "cancelled" for r in results)
        service.generate(prompt, service.plan(prompt, max_tokens=1), RequestTimer())

    run(config(scheduler=strategy, max_concurrency=1, max_queue=2), body)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cancel_stops_generation_and_frees_the_slot(strategy: str) -> None:
    async def body(service: InferenceService) -> None:
        prompt = await service.prepare_chat(user("hi"))
        params = service.plan(prompt, max_tokens=1500, min_new_tokens=1500)
        gen = service.generate(prompt, params, RequestTimer())
        seen = 0
        async for _ in gen:
            seen += 1
            if seen == 3:
                gen.cancel()
        assert gen.finish is not None and gen.finish.reason == "cancelled"
        assert gen.finish.usage.completion_tokens < 1500
        assert service.inflight == {}
        for _ in range(100):  # the owner thread updates its own view right after the event
            if service.scheduler.active_count == 0:
                break
            await asyncio.sleep(0.01)
        assert service.scheduler.active_count == 0

    run(config(scheduler=strategy), body)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_request_timeout_finishes_with_timeout(strategy: str) -> None:
    async def body(service: InferenceService) -> Completion:
        return await chat(service, user("hi"), max_tokens=1900, min_new_tokens=1900)

    result = run(config(scheduler=strategy, request_timeout=0.05), body)
    assert result.finish.reason == "timeout"
    assert result.finish.usage.completion_tokens < 1900


def test_min_tokens_and_logit_bias_and_logprobs() -> None:
    async def body(service: InferenceService) -> tuple[Completion, Completion, list[Any]]:
        forced = await chat(service, user("hi"), max_tokens=5, logit_bias={65: 100.0})
        long = await chat(service, user("hi"), max_tokens=40, min_new_tokens=40)
        prompt = await service.prepare_chat(user("hi"))
        params = service.plan(prompt, max_tokens=4, logprobs=True, top_logprobs=3)
        events = [e async for e in service.generate(prompt, params, RequestTimer())]
        return forced, long, events

    forced, long, events = run(config(), body)
    assert forced.finish.usage.completion_tokens == 5
    assert long.finish.usage.completion_tokens == 40
    assert events and all(e.logprob is not None and e.logprob <= 0 for e in events)
    for e in events:  # greedy: the chosen token is the most likely one
        assert len(e.top_logprobs) == 3
        assert e.top_logprobs[0][0] == e.token_id
        assert e.top_logprobs[0][1] == pytest.approx(e.logprob)


def test_logit_bias_forces_the_token(oracle) -> None:
    async def body(service: InferenceService) -> Completion:
        return await chat(service, user("hi"), max_tokens=4, logit_bias={65: 100.0})

    result = run(config(), body)
    assert result.text == oracle.tokenizer.decode(np.array([65, 65, 65, 65], dtype=np.int32))


def test_seeded_sampling_is_reproducible() -> None:
    async def body(service: InferenceService) -> list[str]:
        return [
            (await chat(service, user("hi"), max_tokens=12, temperature=1.0, seed=s)).text
            for s in (7, 7, 8)
        ]

    a, b, c = run(config(), body)
    assert a == b
    assert a != c


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_json_schema_guidance_produces_valid_json(strategy: str) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
        "x-guidance": {"whitespace_flexible": False},
    }

    async def body(service: InferenceService) -> Completion:
        return await chat(
            service, user("json"), max_tokens=40, guidance=("json_schema", json.dumps(schema))
        )

    result = run(config(scheduler=strategy), body)
    assert isinstance(json.loads(result.text)["ok"], bool)


def test_engine_refuses_what_it_cannot_honour() -> None:
    async def body(service: InferenceService) -> list[str]:
        prompt = await service.prepare_chat(user("hi"))
        refused = []
        for sampling in (
            {"logit_bias": {5: 1.0}},
            {"logprobs": True},
            {"presence_penalty": 1.0},
            {"seed": 3, "temperature": 1.0},
        ):
            with pytest.raises(InvalidRequest) as exc:
                service.plan(prompt, max_tokens=4, **sampling)
            refused.append(exc.value.message)
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
        assert ok.finish.usage.completion_tokens == 6
        return refused

    messages = run(config(scheduler="engine"), body)
    assert all("not supported by the 'engine' scheduler" in m for m in messages)


def test_recycled_generator_gives_the_same_output_as_a_fresh_one() -> None:
    async def body(service: InferenceService) -> list[Completion]:
        out = []
        for text in ("alpha beta gamma", "7 + 8 = 15 and more"):  # no shared first token
            prompt = await service.prepare_text(text)
            params = service.plan(prompt, max_tokens=10)
            out.append(await service.complete(service.generate(prompt, params, RequestTimer())))
        return out

    warm = run(config(cache_sequences=1), body)  # the 2nd prompt recycles the 1st's generator
    cold = run(config(cache_sequences=0), body)
    assert [c.text for c in warm] == [c.text for c in cold]
    assert warm[1].finish.usage.cached_tokens == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("cache", [0, 4])
def test_min_tokens_holds_eos_back_exactly(strategy: str, cache: int) -> None:
    async def body(service: InferenceService) -> list[Completion]:
        eos = next(iter(service.scheduler.model.eos_token_ids))  # type: ignore[union-attr]
        out = []
        for text, n in (("first prompt", 5), ("first prompt", 3), ("other", 7), ("first", 0)):
            bias = {eos: 100.0} if strategy == "generator" else None
            out.append(
                await chat(service, user(text), max_tokens=12, min_new_tokens=n, logit_bias=bias)
            )
        return out

    results = run(config(scheduler=strategy, cache_sequences=cache), body)
    if strategy == "generator":  # EOS is forced by the bias: output ends exactly at min_tokens
        assert [r.finish.usage.completion_tokens for r in results] == [5, 3, 7, 0]
        assert all(r.finish.reason == "stop" for r in results)
    else:
        assert all(
            r.finish.usage.completion_tokens >= n
            for r, n in zip(results, (5, 3, 7, 0), strict=True)
        )
