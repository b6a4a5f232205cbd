"""onnxruntime-genai's own n-gram speculation on the ``generator`` strategy (batch-1
og.Generators), on the fp32 test models: greedy and seeded answers the same with it on and
off, its counts in each answer's usage, where it cannot run (and what a request that asks
for it there is told), and the ``engine`` strategy's refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from backends.config import ServiceConfig
from backends.core.handle import Result
from backends.engine import og_ngram
from backends.errors import InvalidRequest
from backends.types import GenerationParams, Speculative
from tests.backends.engine.batch.test_architectures import og_greedy
from tests.backends.engine.batch.test_speculation import (
    DEMO,
    LONG,
    PROMPTS,
    QWEN2,
    answers,
    chat,
    ids,
    spec_config,
)
from tests.backends.engine.helpers import text

ASKED = Speculative(8)


def generator(path: Path, k: int, **kw: Any) -> ServiceConfig:
    cfg = spec_config(path, k, **kw)
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, scheduler="generator"))


def drafted(results: list[Result]) -> tuple[int, int, int]:
    """Tokens drafted and accepted, and verify runs, over the answers' usage."""
    usages = [r.usage for r in results]
    return (
        sum(u.drafted_tokens for u in usages),
        sum(u.accepted_tokens for u in usages),
        sum(u.verify_runs for u in usages),
    )


def on_and_off(path: Path, prompts: list[str], **kw: Any) -> tuple[list[Result], list[Result]]:
    on = answers(generator(path, 8), prompts, False, **kw)
    off = answers(generator(path, 0), prompts, False, **kw)
    return on, off


# ---- without a model -------------------------------------------------------------------------
@pytest.mark.unit
def test_ogs_options_fit_a_sequences_settings() -> None:
    assert og_ngram.options(Speculative(8, 2, 4)) == {"ngram_size": 5, "max_draft_tokens": 8}
    assert og_ngram.options(Speculative(32, 1, 16)) == {"ngram_size": 16, "max_draft_tokens": 16}


@pytest.mark.unit
def test_where_og_can_rewind_its_cache() -> None:
    window = {"model": {"decoder": {"sliding_window": {"window_size": 512}}}}
    assert og_ngram.room({"model": {"decoder": {}}}) is None
    assert og_ngram.room(window) == 512
    window["model"]["decoder"]["sliding_window"]["slide_key_value_cache"] = True
    assert og_ngram.room(window) == 0
    assert og_ngram.fits(None, 10**6) and og_ngram.fits(512, 512) and not og_ngram.fits(512, 513)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("asked", "params", "limit", "tokens", "field"),
    [
        (Speculative(17), {}, None, 0, "speculative.num_speculative_tokens"),
        (Speculative(lookup_max=16), {}, None, 0, "speculative.prompt_lookup_max"),
        (Speculative(lookup_min=2), {}, None, 0, "speculative.prompt_lookup_min"),
        (ASKED, {"logprobs": True}, None, 0, "speculative"),
        (ASKED, {"presence_penalty": 0.5}, None, 0, "speculative"),
        (ASKED, {"min_p": 0.1, "temperature": 0.7}, None, 0, "speculative"),
        (ASKED, {}, 0, 0, "speculative"),
        (ASKED, {}, 512, 600, "speculative"),
    ],
)
def test_what_og_cannot_honour_is_refused_by_name(
    asked: Speculative, params: dict[str, Any], limit: int | None, tokens: int, field: str
) -> None:
    p = GenerationParams(max_new_tokens=8, speculative=asked, **params)
    own = asked.over(Speculative(0, 2, 4))
    refusal = og_ngram.refusal(asked, own, p, limit, tokens)
    assert refusal is not None and refusal.param == field, refusal


@pytest.mark.unit
def test_what_og_can_honour_is_not_refused() -> None:
    p = GenerationParams(max_new_tokens=8, min_p=0.1)  # greedy: min-p changes nothing
    for asked in (ASKED, Speculative(16, 4, 4), Speculative(0, 1, 9)):
        assert og_ngram.refusal(asked, asked.over(Speculative(0, 2, 4)), p, 512, 500) is None
    assert og_ngram.counted({}, dict.fromkeys(og_ngram.COUNTS, 3.0)) == (3, 3, 3)


# ---- on the fp32 models ----------------------------------------------------------------------
@pytest.mark.model
@pytest.mark.parametrize("path", [DEMO, QWEN2], ids=["demo", "qwen2"])
def test_greedy_equals_og_generator_without_it(path: Path) -> None:
    # qwen2 has no window to stay in: a prompt of 1,000 tokens too. Its random weights write
    # no 4-gram twice: it looks up single tokens, so that it drafts (and misses).
    long = chat("Repeat exactly: " + " ".join(f"/src/module_{i}/file_{i}.py" for i in range(40)))
    prompts = PROMPTS if path == DEMO else [*PROMPTS, long]
    asked = None if path == DEMO else Speculative(8, 1, 1)
    expected, _ = og_greedy(path, prompts, 60)
    got = answers(generator(path, 8), prompts, False, max_tokens=60, speculative=asked)
    assert [text(r) for r in got] == expected
    drafts, accepted, runs = drafted(got)
    assert runs > 0 and drafts > 0
    if path == DEMO:  # it copies: drafts are taken
        assert 0 < accepted < drafts


@pytest.mark.model
def test_seeded_sampling_is_the_same_on_and_off() -> None:
    on, off = [], []
    for seed in range(3):
        kw = {"max_tokens": 60, "temperature": 0.7, "top_k": 40, "top_p": 0.95, "seed": seed}
        got = on_and_off(DEMO, PROMPTS, **kw)
        on += got[0]
        off += got[1]
    assert [ids(r) for r in on] == [ids(r) for r in off]
    assert len({tuple(ids(r)) for r in on}) > len(PROMPTS)  # the seeds made a difference
    assert drafted(on)[1] > 0 and drafted(off) == (0, 0, 0)


@pytest.mark.model
@pytest.mark.parametrize(
    "sampling",
    [
        {"n": 3, "temperature": 0.9, "seed": 5},
        {"guidance": ("json_schema", json.dumps({"type": "object"}))},
        {"stop": ["notes", "&&"]},
        {"max_tokens": 7},
        {"repetition_penalty": 1.3, "min_new_tokens": 12},
    ],
    ids=["n-choices", "json-schema", "stop-strings", "max-tokens", "repetition-min-tokens"],
)
def test_every_other_feature_is_the_same_on_and_off(sampling: dict[str, Any]) -> None:
    kw = {"max_tokens": 50, **sampling}
    on, off = on_and_off(DEMO, PROMPTS, **kw)
    for a, b in zip(on, off, strict=True):
        assert [c.text for c in a.choices] == [c.text for c in b.choices]
        assert [c.finish_reason for c in a.choices] == [c.finish_reason for c in b.choices]
    assert drafted(on)[2] > 0


@pytest.mark.model
@pytest.mark.parametrize(
    "sampling",
    [{"logprobs": True, "top_logprobs": 2}, {"min_p": 0.1, "temperature": 0.8, "seed": 3}],
    ids=["logprobs", "min-p"],
)
def test_what_processes_the_logits_each_step_runs_without_it(sampling: dict[str, Any]) -> None:
    """og's n-gram cannot run beside logits read and replaced each step: with the server's
    setting such a sequence decodes plainly, and a request that asks for it is refused."""
    on, off = on_and_off(DEMO, PROMPTS, max_tokens=40, **sampling)
    assert [ids(r) for r in on] == [ids(r) for r in off]
    assert drafted(on) == (0, 0, 0)
    with pytest.raises(InvalidRequest, match="cannot be combined with") as refused:
        answers(generator(DEMO, 0), PROMPTS[:1], False, speculative=ASKED, **sampling)
    assert refused.value.param == "speculative"


@pytest.mark.model
def test_past_the_sliding_window_it_runs_without_it() -> None:
    """og cannot rewind the demo model's window cache once it dropped a position: a sequence
    that may pass the window decodes plainly, and a request that asks for it is refused."""
    [on] = answers(generator(DEMO, 8), [LONG], False, max_tokens=60)
    [off] = answers(generator(DEMO, 0), [LONG], False, max_tokens=60)
    assert ids(on) == ids(off) and drafted([on]) == (0, 0, 0)
    with pytest.raises(InvalidRequest, match="512-token attention window"):
        answers(generator(DEMO, 0), [LONG], False, max_tokens=60, speculative=ASKED)


@pytest.mark.model
def test_a_request_turns_it_on_and_off() -> None:
    [on] = answers(generator(DEMO, 0), PROMPTS[:1], False, max_tokens=60, speculative=ASKED)
    [off] = answers(
        generator(DEMO, 8), PROMPTS[:1], False, max_tokens=60, speculative=Speculative(0)
    )
    assert ids(on) == ids(off)
    assert drafted([on])[1] > 0 and drafted([off]) == (0, 0, 0)
    with pytest.raises(InvalidRequest) as refused:
        answers(generator(DEMO, 0), PROMPTS[:1], False, speculative=Speculative(20))
    assert refused.value.param == "speculative.num_speculative_tokens"


@pytest.mark.model
@pytest.mark.parametrize(
    ("sampling", "field"),
    [
        ({"speculative": ASKED}, "speculative"),
        ({"min_p": 0.2, "temperature": 0.7}, "min_p"),
    ],
)
def test_the_engine_strategy_refuses_what_it_has_not(sampling: dict[str, Any], field: str) -> None:
    cfg = spec_config(DEMO, 0)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, scheduler="engine"))
    with pytest.raises(InvalidRequest) as refused:
        answers(cfg, PROMPTS[:1], False, max_tokens=8, **sampling)
    assert refused.value.param == field
    [greedy] = answers(cfg, PROMPTS[:1], False, max_tokens=8, min_p=0.2)  # greedy: no cut
    assert greedy.choices[0].text


@pytest.mark.model
def test_a_cancel_while_og_holds_drafted_tokens_leaves_the_others_exact() -> None:
    from tests.backends.engine.batch.test_strategy import cancel_one_among
    from tests.backends.engine.helpers import run

    expected, _ = og_greedy(DEMO, PROMPTS, 60)
    body = cancel_one_among(PROMPTS, 60, PROMPTS[0], 300)
    got, finish, made = run(generator(DEMO, 8), body)
    assert got == expected
    assert finish == "cancelled" and made < 300
