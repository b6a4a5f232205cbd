"""The core on the real demo model (no HTTP): the sampling features applied on the owner thread
(min_tokens, logit_bias, logprobs, seeds, JSON schema guidance), and what the 'engine'
scheduler refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backends.core.handle import ChoiceDelta, Result
from backends.core.service import InferenceService
from backends.errors import (
    InvalidRequest,
)
from tests.backends.engine.helpers import (
    EOS,
    FULL,
    STRATEGIES,
    chat,
    config,
    request,
    run,
    text,
    user,
)

pytestmark = pytest.mark.model


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
