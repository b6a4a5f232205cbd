"""The batch strategy's overlapped prefill (``prefill_overlap``) on the real demo model: a
newcomer's prompt is fed on the worker thread while the decoding rows go on stepping, and greedy
output still equals the plain og.Generator loop token for token."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.service import InferenceService
from backends.engine.batch.decoder import Decoder
from backends.engine.batch.strategy import BatchStrategy
from config.settings import DEMO_MODEL_DIR
from tests.backends.engine.batch.test_step_budget import LONG, SHORT
from tests.backends.engine.helpers import request, run, text

pytestmark = pytest.mark.model

HELD_STEPS = 3  # decode runs a prefill chunk waits for before it runs
NEW = 160  # tokens each short prompt makes: they still decode while the long one is read


def overlap_config(
    prefill_chunk: int = 256, cache_sequences: int = 0, threads: int = 1
) -> ServiceConfig:
    return ServiceConfig(
        ModelConfig(
            DEMO_MODEL_DIR,
            device="cpu",
            intra_op_threads=threads,
            scheduler="batch",
            prefill_chunk=prefill_chunk,
            prefill_overlap=True,
            cache_sequences=cache_sequences,
        ),
        Limits(),
    )


class HeldPrefill:
    """Every decoder run in order; a prefill run (one row, two or more tokens) that starts
    while rows decode holds until ``HELD_STEPS`` decode runs have gone by, so it only ends if
    decoding goes on without waiting for it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int]] = []
        self.sessions: set[tuple[str, int]] = set()  # (run kind, the session's id)
        self.held: list[bool] = []  # per held prefill: whether the decode runs came
        self._lock = threading.Lock()
        self._decodes = 0
        self._decoded = threading.Condition(self._lock)
        run_decoder = Decoder.run

        def spy(decoder: Decoder, input_ids: Any, *args: Any) -> Any:
            rows, new = input_ids.shape
            with self._lock:
                self.sessions.add(("decode" if new == 1 else "prefill", id(decoder.session)))
            if new == 1:
                with self._lock:
                    self.calls.append(("decode", rows))
                    self._decodes += 1
                    self._decoded.notify_all()
            else:
                with self._lock:
                    self.calls.append(("prefill", new))
                    if threading.current_thread().name.startswith("batch-prefill"):
                        start = self._decodes
                        self.held.append(
                            self._decoded.wait_for(
                                lambda: self._decodes >= start + HELD_STEPS, timeout=30
                            )
                        )
            return run_decoder(decoder, input_ids, *args)

        monkeypatch.setattr(Decoder, "run", spy)


def long_prompt_while_others_decode(spy: HeldPrefill) -> Any:
    async def body(service: InferenceService) -> list[str]:
        shorts = [
            asyncio.create_task(
                (await service.submit(request(p, max_tokens=NEW, min_new_tokens=NEW))).result()
            )
            for p in SHORT
        ]
        while sum(kind == "decode" for kind, _ in spy.calls) < 2:
            await asyncio.sleep(0.005)
        long = await (await service.submit(request(LONG, max_tokens=8))).result()
        return [text(r) for r in await asyncio.gather(*shorts)] + [text(long)]

    return body


@pytest.mark.parametrize(("prefill_chunk", "threads"), [(256, 1), (48, 1), (48, 2)])
def test_a_prompt_fed_beside_decode_steps_equals_the_oracle(
    oracle, monkeypatch: pytest.MonkeyPatch, prefill_chunk: int, threads: int
) -> None:
    if threads > len(os.sched_getaffinity(0)):
        pytest.skip(f"needs {threads} CPUs")
    expected = [oracle.greedy(p, NEW, NEW)[0] for p in SHORT] + [oracle.greedy(LONG, 8)[0]]
    spy = HeldPrefill(monkeypatch)
    got = run(overlap_config(prefill_chunk, threads=threads), long_prompt_while_others_decode(spy))
    assert got == expected
    # With two threads, the overlapping runs use a second session (one thread each): the
    # decode runs then go through both sessions, the prefills beside them through the second.
    decode_sessions = {sid for kind, sid in spy.sessions if kind == "decode"}
    assert len(decode_sessions) == threads
    # Every chunk of the long prompt ran beside decode runs that did not wait for it.
    assert spy.held and all(spy.held), spy.held
    chunks = [n for kind, n in spy.calls if kind == "prefill" and n > 8]
    assert len(chunks) >= (2 if prefill_chunk == 48 else 1)
    assert all(n <= prefill_chunk for n in chunks)


def test_a_prompt_cancelled_while_its_chunk_runs_leaves_the_others_unchanged(
    oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = 200  # the short prompts still decode when the cancel comes
    expected = [oracle.greedy(p, many, many)[0] for p in SHORT]
    started, release, settled, decodes = threading.Event(), threading.Event(), [], []
    run_decoder, settle = Decoder.run, BatchStrategy._settle

    def spy(decoder: Decoder, input_ids: Any, *args: Any) -> Any:
        if input_ids.shape[1] == 1:
            decodes.append(input_ids.shape[0])
        long = input_ids.shape[1] > 16  # a chunk of the long prompt, not a short one's
        if long and threading.current_thread().name.startswith("batch-prefill"):
            started.set()
            release.wait(30)  # until the owner thread waits for it, dropping its sequence
        return run_decoder(decoder, input_ids, *args)

    def spy_settle(strategy: BatchStrategy) -> bool:
        settled.append(strategy._inflight is not None)
        release.set()
        return settle(strategy)

    monkeypatch.setattr(Decoder, "run", spy)
    monkeypatch.setattr(BatchStrategy, "_settle", spy_settle)

    async def body(service: InferenceService) -> tuple[list[str], str | None, str]:
        shorts = [
            await service.submit(request(p, max_tokens=many, min_new_tokens=many)) for p in SHORT
        ]
        while len(decodes) < 2:  # they decode
            await asyncio.sleep(0.001)
        doomed = await service.submit(request(LONG, max_tokens=8))
        while not started.is_set():
            await asyncio.sleep(0.001)
        doomed.cancel()
        finish = (await doomed.result()).choices[0].finish_reason
        results = [text(await h.result()) for h in shorts]
        # The row it was fed into serves the next request like any other.
        again = await (await service.submit(request(LONG, max_tokens=8))).result()
        return results, finish, text(again)

    got, finish, again = run(overlap_config(cache_sequences=4), body)
    assert settled[:1] == [True]  # dropped while its chunk was in flight
    assert got == expected
    assert finish == "cancelled"
    assert again == oracle.greedy(LONG, 8)[0]
