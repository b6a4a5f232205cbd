"""The batch strategy on the real demo model, against a plain og.Generator loop: ragged rows
arriving at different times, chunked prefill, seeds independent of the batch, cancellation,
prefix reuse next to dummy rows, profiling, the KV budget and the fallback."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.handle import Result
from backends.core.service import InferenceService
from backends.engine.profiling import ProfileWindow
from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.backends.engine.helpers import request, run, text, user
from tests.backends.engine.oracle_margins import GreedyOracle, answer_ids, assert_near_tie

pytestmark = pytest.mark.model

MODEL_FIELDS = (
    "cache_sequences",
    "prefill_chunk",
    "kv_cache_mib",
    "prefix_share_min",
    "prefix_store_mib",
)


FULL = REPO_ROOT / "tests" / "models" / "phi3"  # full attention, the demo tokenizer
SLIDING = REPO_ROOT / "tests" / "models" / "mistral"  # a 64-token window


def batch_config(path: Path = DEMO_MODEL_DIR, **kw: Any) -> ServiceConfig:
    model = {k: kw.pop(k) for k in MODEL_FIELDS if k in kw}
    return ServiceConfig(
        ModelConfig(path, device="cpu", intra_op_threads=1, scheduler="batch", **model),
        Limits(**kw),
    )


async def greedy(service: InferenceService, prompt: str, n: int, delay: float = 0.0) -> Result:
    await asyncio.sleep(delay)
    return await (await service.submit(request(prompt, max_tokens=n))).result()


def test_ragged_rows_arriving_at_different_times_equal_the_oracle(oracle) -> None:
    rng = random.Random(5)
    words = "river mountain city road tree bird fish water fire".split()
    # Chats of ragged lengths; eight whose greedy answers differ, so that rows mixed up show.
    rows: dict[str, tuple[str, int]] = {}
    for _ in range(60):
        system = " ".join(rng.choices(words, k=rng.randint(1, 60)))
        ask = f"Tell me about the {rng.choice(words)}."
        prompt = oracle.chat_prompt(
            [{"role": "system", "content": system}, {"role": "user", "content": ask}]
        )
        n = rng.randint(4, 40)
        rows.setdefault(oracle.greedy(prompt, n)[0], (prompt, n))
        if len(rows) == 8:
            break
    assert len(rows) == 8, "too few different answers to tell rows apart"
    prompts, lengths = [p for p, _ in rows.values()], [n for _, n in rows.values()]

    async def body(service: InferenceService) -> list[list[int]]:
        runs = [
            greedy(service, p, n, delay=0.002 * i)
            for i, (p, n) in enumerate(zip(prompts, lengths, strict=True))
        ]
        return [answer_ids(r.choices[0]) for r in await asyncio.gather(*runs)]

    # Chunks of 16: most prompts are prefilled in several pieces, between decode steps.
    got = run(batch_config(prefill_chunk=16, cache_sequences=0), body)
    # The demo model is int4: equal to og up to near-ties (a multi-token run rounds otherwise).
    margins = GreedyOracle(DEMO_MODEL_DIR)
    for row, (ids, p, n) in enumerate(zip(got, prompts, lengths, strict=True)):
        assert_near_tie(ids, margins.follow(p, n), margins.tolerance, label=f"row {row}")


def test_a_seeded_request_is_independent_of_its_company() -> None:
    seeded = request(user("hi"), max_tokens=24, temperature=1.0, seed=42)

    async def alone(service: InferenceService) -> str:
        return text(await (await service.submit(seeded)).result())

    async def in_company(service: InferenceService) -> str:
        others = [
            service.submit(request(user(f"other {i}"), max_tokens=30, temperature=0.8))
            for i in range(4)
        ]
        handles = [await h for h in others]
        mine = await (await service.submit(seeded)).result()
        await asyncio.gather(*(h.result() for h in handles))
        return text(mine)

    assert run(batch_config(), alone) == run(batch_config(), in_company)


def test_cancelling_one_row_leaves_the_others_unchanged(oracle) -> None:
    prompts = ["Once upon a time", "The river", "Hello world"]
    expected = [oracle.greedy(p, 30)[0] for p in prompts]

    got, finish, made = run(
        batch_config(cache_sequences=0), cancel_one_among(prompts, 30, "long one", 1500)
    )
    assert got == expected
    assert finish == "cancelled" and made < 1500


def cancel_one_among(prompts: list[Any], n: int, doomed_prompt: Any, doomed_n: int) -> Any:
    """A body for :func:`run`: ``prompts`` (``n`` greedy tokens each) and a request that must
    write ``doomed_n`` tokens, cancelled at its first; returns the others' texts, the doomed
    one's finish reason and how many tokens it made."""

    async def body(service: InferenceService) -> tuple[list[str], str | None, int]:
        handles = [await service.submit(request(p, max_tokens=n)) for p in prompts]
        doomed = await service.submit(
            request(doomed_prompt, max_tokens=doomed_n, min_new_tokens=doomed_n)
        )
        finish = None
        async for piece in doomed:
            if piece.token is not None:
                doomed.cancel()
            finish = piece.finish_reason or finish
        results = [await h.result() for h in handles]
        return [text(r) for r in results], finish, doomed.usage().completion_tokens

    return body


def test_a_resident_row_survives_riding_along_as_a_dummy() -> None:
    turn1 = user("tell me about the mountain and the river " * 6)

    async def conversation(service: InferenceService) -> tuple[Result, Result]:
        first = await (await service.submit(request(turn1, max_tokens=12))).result()
        # Another chat decodes for a while; the first chat's row sits in its decode batch.
        await (await service.submit(request(user("a different chat"), max_tokens=60))).result()
        history = [*turn1, {"role": "assistant", "content": text(first)}]
        second = await (
            await service.submit(request([*history, *user("and the city?")], max_tokens=12))
        ).result()
        return first, second

    warm1, warm2 = run(batch_config(cache_sequences=4), conversation)
    cold1, cold2 = run(batch_config(cache_sequences=0, prefix_share_min=0), conversation)
    assert warm2.usage.cached_tokens > 30 and cold2.usage.cached_tokens == 0
    assert (text(warm1), text(warm2)) == (text(cold1), text(cold2))


def test_busy_rows_stay_at_the_bottom_so_every_decode_row_is_live(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finished chats stay resident; the next request must not decode them along as dummies.
    A chat's resident row is swapped out of the way and swapped back for its next turn."""
    from backends.engine.batch.decoder import Decoder

    decode_rows: list[int] = []
    run_decoder = Decoder.run

    def spy(self: Decoder, input_ids: Any, *args: Any, **kwargs: Any) -> Any:
        if input_ids.shape[1] == 1:
            decode_rows.append(input_ids.shape[0])
        return run_decoder(self, input_ids, *args, **kwargs)

    turn1 = user("tell me about the mountain and the river " * 6)

    async def chats(service: InferenceService) -> tuple[list[str], int]:
        first = await (await service.submit(request(turn1, max_tokens=12))).result()
        others = [
            await (await service.submit(request(user(f"chat number {i}"), max_tokens=20))).result()
            for i in range(3)
        ]
        history = [*turn1, {"role": "assistant", "content": text(first)}]
        second = await (
            await service.submit(request([*history, *user("and the city?")], max_tokens=12))
        ).result()
        return [text(r) for r in (first, *others, second)], second.usage.cached_tokens

    monkeypatch.setattr(Decoder, "run", spy)
    warm, reused = run(batch_config(cache_sequences=4), chats)
    assert decode_rows and set(decode_rows) == {1}
    assert reused > 30  # the first chat's row, swapped out of the way and back down
    monkeypatch.setattr(Decoder, "run", run_decoder)
    cold, _ = run(batch_config(cache_sequences=0, prefix_share_min=0), chats)
    assert warm == cold


def test_profiling_writes_an_ort_session_profile(tmp_path: Path) -> None:
    async def body(service: InferenceService) -> None:
        await service.start_profiling(ProfileWindow(tmp_path, steps=100, max_files=5))
        await (await service.submit(request("river", max_tokens=4))).result()
        assert await service.stop_profiling() == 1
        await (await service.submit(request("river", max_tokens=4))).result()

    run(batch_config(), body)
    [profile] = tmp_path.glob("ort_*.json")
    events = json.loads(profile.read_text())
    assert any(e.get("name", "").endswith("model_run") for e in events)


def test_a_kv_budget_bounds_the_sequence_length() -> None:
    async def body(service: InferenceService) -> int | None:
        return service.max_length

    # A full-attention model's KV bytes per token: layers x kv heads x head size x 4 bytes x 2.
    decoder = json.loads((FULL / "genai_config.json").read_text())["model"]["decoder"]
    per_token = (
        decoder["num_hidden_layers"] * decoder["num_key_value_heads"] * decoder["head_size"] * 8
    )
    expected = 1024 * 1024 // (8 * per_token)  # 1 MiB over 8 slots
    assert run(batch_config(FULL, kv_cache_mib=1.0, max_concurrency=8), body) == expected
    # A sliding-window model's buffer holds at least its window (64): its attention op
    # refuses less, whatever the budget.
    assert run(batch_config(SLIDING, kv_cache_mib=0.01, max_concurrency=8), body) == 64


def test_a_graph_it_does_not_understand_falls_back_to_the_generator(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(FULL, folder)  # og runs a sliding-window model only with a shared buffer
    config_path = folder / "genai_config.json"
    config = json.loads(config_path.read_text())
    config["search"]["past_present_share_buffer"] = False
    config_path.write_text(json.dumps(config))

    async def body(service: InferenceService) -> str | None:
        await (await service.submit(request("river", max_tokens=3))).result()
        return service.strategy_name

    with caplog.at_level(logging.WARNING, logger="genai.service"):
        assert run(batch_config(folder), body) == "generator"
    assert "batch scheduler: cannot serve this model" in caplog.text
    assert "not shared between past and present" in caplog.text


def test_no_prompt_token_is_fed_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step of one new token takes other kernels than a step of several (on int4 models
    with int8 activations the logits moved by up to 1.1, backends/engine/prefix_cache.py): a
    prompt's tokens are fed two or more at a time, in chunks and after a reused prefix alike,
    so a prompt reads the same whichever way it was prefilled."""
    from backends.engine.batch.decoder import Decoder

    calls: list[tuple[int, int]] = []  # (new tokens, first position) of every one-row run
    run_decoder = Decoder.run

    def spy(self: Decoder, input_ids: Any, mask: Any, positions: Any, *args: Any) -> Any:
        if input_ids.shape[0] == 1:
            calls.append((input_ids.shape[1], int(positions[0, 0])))
        return run_decoder(self, input_ids, mask, positions, *args)

    async def body(service: InferenceService) -> list[tuple[str, int, int, list]]:
        out = []
        for words in range(3, 40):  # prompt lengths across the 16-token chunk boundaries
            prompt = user("river " * words)
            for _ in range(2):  # the second run reuses the first one's prefix
                calls.clear()
                result = await (await service.submit(request(prompt, max_tokens=3))).result()
                fed = [n for n, first in calls if first < result.usage.prompt_tokens]
                out.append((text(result), result.usage.prompt_tokens, words, fed))
        return out

    monkeypatch.setattr(Decoder, "run", spy)
    # Short prompts: share any prefix (a repeated prompt is not a continuation of the row
    # holding it and its answer, so it gets a copy of it).
    runs = run(batch_config(cache_sequences=2, prefill_chunk=16, prefix_share_min=1), body)
    assert {n % 16 for _, n, _, _ in runs} == set(range(16))  # every last-chunk size was met
    for first, second in zip(runs[::2], runs[1::2], strict=True):
        assert all(n >= 2 for n in first[3] + second[3]), (first, second)
        assert 2 <= sum(second[3]) < second[1]  # the second run reused a prefix
        assert first[0] == second[0]
