"""The batch strategy's step token budget on the real demo model: a long prompt arriving while
others decode is read in chunks that fit beside the decoding rows, every step decodes them,
and greedy output still equals the plain og.Generator loop token for token."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.service import InferenceService
from backends.engine.batch.decoder import Decoder
from backends.engine.batch.strategy import BatchStrategy
from config.settings import DEMO_MODEL_DIR
from tests.backends.engine.helpers import request, run, text

pytestmark = pytest.mark.model

SHORT = ["Once upon a time", "The river", "Hello world"]
LONG = " ".join(["the mountain and the river by the city road"] * 24)
NEW = 48  # tokens each short prompt makes (min_tokens = max_tokens: no early EOS)


def budget_config(step_tokens: int, prefill_chunk: int = 256) -> ServiceConfig:
    return ServiceConfig(
        ModelConfig(
            DEMO_MODEL_DIR,
            device="cpu",
            intra_op_threads=1,
            scheduler="batch",
            prefill_chunk=prefill_chunk,
            step_tokens=step_tokens,
            prefill_overlap=False,  # the budget applies to prefills that step with the decode
            cache_sequences=0,
            # no verify runs: a row's 1 + k tokens would read as a prompt chunk here (where
            # speculation pays on the measured costs, the demo's repeating prompts draft)
            speculative_tokens=0,
        ),
        Limits(),
    )


class Spy:
    """Every decoder run, in order: ("prefill", new tokens) for one row fed two or more
    tokens, ("decode", rows) for a run of one token per row; "step" where a scheduler step
    begins (a step's two runs may overlap, in either order); and the test's markers. The
    first decode run of every short prompt's row holds the owner thread until the long prompt
    is submitted, so it arrives while they all decode, whatever the machine's speed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[Any] = []
        self.reached, self.go_on = threading.Event(), threading.Event()
        run_decoder = Decoder.run

        def spy(decoder: Decoder, input_ids: Any, *args: Any) -> Any:
            rows, new = input_ids.shape
            self.calls.append(("decode", rows) if new == 1 else ("prefill", new))
            if new == 1 and rows >= len(SHORT) and not self.reached.is_set():
                self.reached.set()
                assert self.go_on.wait(60)
            return run_decoder(decoder, input_ids, *args)

        monkeypatch.setattr(Decoder, "run", spy)
        step = BatchStrategy.step

        def spy_step(strategy: BatchStrategy) -> None:
            self.calls.append("step")
            step(strategy)

        monkeypatch.setattr(BatchStrategy, "step", spy_step)

    def clear(self) -> None:
        self.calls.clear()
        self.reached.clear()
        self.go_on.clear()

    def long_prompt_while_others_decode(self) -> Any:
        """The body: three short prompts decode; once they all do, the long one arrives."""

        async def body(service: InferenceService) -> list[str]:
            shorts = [
                asyncio.create_task(
                    (await service.submit(request(p, max_tokens=NEW, min_new_tokens=NEW))).result()
                )
                for p in SHORT
            ]
            while not self.reached.is_set():
                await asyncio.sleep(0.005)
            self.calls.append("long prompt submitted")
            # The owner thread reads the prompt: the submission is queued to it (at the
            # task's first step), then the held decode run goes on.
            submitted = asyncio.create_task(service.submit(request(LONG, max_tokens=8)))
            await asyncio.sleep(0)
            self.go_on.set()
            long = await (await submitted).result()
            self.calls.append(("long prompt tokens", long.usage.prompt_tokens))
            return [text(r) for r in await asyncio.gather(*shorts)] + [text(long)]

        return body


def long_chunks(calls: list[Any]) -> tuple[list[int], list[list[tuple[str, int]]]]:
    """The long prompt's prefill chunks, and the runs of each step that fed one."""
    start = calls.index("long prompt submitted")
    steps: list[list[tuple[str, int]]] = [[]]
    for call in calls[start + 1 :]:
        if call == "step":
            steps.append([])
        elif isinstance(call, tuple) and call[0] in ("prefill", "decode"):
            steps[-1].append(call)
    feeding = [runs for runs in steps if any(kind == "prefill" for kind, _ in runs)]
    return [n for runs in feeding for kind, n in runs if kind == "prefill"], feeding


def test_a_long_prompt_beside_decoding_rows_equals_the_oracle(
    oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [oracle.greedy(p, NEW, NEW)[0] for p in SHORT] + [oracle.greedy(LONG, 8)[0]]
    spy = Spy(monkeypatch)
    got = run(budget_config(step_tokens=24), spy.long_prompt_while_others_decode())
    assert got == expected
    chunks, _ = long_chunks(spy.calls)
    assert len(chunks) > 1  # the budget really chunked the long prompt


def test_decoding_rows_get_a_token_every_step_while_a_long_prompt_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    budget = 24
    spy = Spy(monkeypatch)
    run(budget_config(step_tokens=budget), spy.long_prompt_while_others_decode())
    calls = spy.calls
    prompt_tokens = next(c[1] for c in calls if c[0] == "long prompt tokens")
    chunks, window = long_chunks(calls)
    assert sum(chunks) == prompt_tokens
    # Beside three decoding rows a chunk feeds at most budget - 3 tokens (at least two).
    assert all(2 <= n <= budget - len(SHORT) for n in chunks), chunks
    assert len(chunks) >= prompt_tokens // (budget - len(SHORT))
    # Every step that feeds a chunk also runs one decode of every decoding row (and the
    # newcomer's row riding along): the others get a token each step while it is read.
    for runs in window:
        assert sorted(kind for kind, _ in runs) == ["decode", "prefill"], window
        assert all(rows >= len(SHORT) for kind, rows in runs if kind == "decode"), window

    # Without a budget the same prompt goes in prefill_chunk-sized pieces.
    spy.clear()
    run(budget_config(step_tokens=0), spy.long_prompt_while_others_decode())
    unbudgeted, _ = long_chunks(spy.calls)
    assert unbudgeted == [prompt_tokens]


def test_with_nothing_decoding_a_prompt_goes_in_prefill_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = Spy(monkeypatch).calls

    async def body(service: InferenceService) -> int:
        result = await (await service.submit(request(LONG, max_tokens=2))).result()
        return result.usage.prompt_tokens

    prompt_tokens = run(budget_config(step_tokens=24, prefill_chunk=64), body)
    chunks = [c[1] for c in calls if isinstance(c, tuple) and c[0] == "prefill"]
    # As few chunks of at most 64 as hold it, of even size (not the budget's 24).
    assert sum(chunks) == prompt_tokens and len(chunks) == -(-prompt_tokens // 64)
    assert max(chunks) - min(chunks) <= 2 and max(chunks) > 24
