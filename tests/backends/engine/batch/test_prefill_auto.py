"""``prefill_overlap="auto"`` on the real demo model: the policy's choice (fixed here by the
costs it is given) decides where a newcomer's prompt is read while others decode: beside the
decode steps on the worker thread, or in the steps, whole or in stall-sized chunks; greedy
output equals the plain og.Generator loop token for token either way."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import backends.engine.batch.strategy as strategy_module
from backends.config import Limits, ModelConfig, ServiceConfig
from backends.engine.batch.decoder import Decoder
from backends.engine.batch.prefill_policy import Average, PrefillPolicy
from config.settings import DEMO_MODEL_DIR
from tests.backends.engine.batch.test_step_budget import LONG, NEW, SHORT, Spy, long_chunks
from tests.backends.engine.helpers import run

pytestmark = pytest.mark.model

MS = 1e-3


def auto_config() -> ServiceConfig:
    return ServiceConfig(
        ModelConfig(
            DEMO_MODEL_DIR,
            device="cpu",
            intra_op_threads=1,
            scheduler="batch",
            prefill_overlap="auto",
            cache_sequences=0,
            # no verify runs: a row's 1 + k tokens would read as a prompt chunk here (where
            # speculation pays on the measured costs, the demo's repeating prompts draft)
            speculative_tokens=0,
        ),
        Limits(),
    )


def costs(
    monkeypatch: pytest.MonkeyPatch, read: float, step: float, pays: bool, probe: int = 10_000
) -> None:
    """Every policy the strategy makes has seen these costs and learns nothing more."""

    class Fixed(PrefillPolicy):
        def prefilled(self, tokens: int, seconds: float, *, beside: bool) -> None:
            pass

        def decoded(self, seconds: float, *, beside: bool) -> None:
            pass

    def make(**kw: Any) -> PrefillPolicy:
        # pays: 1.2 x (1 - 1/3) = 0.8 of a read alone; not: 10 x (1 - 1/2) = 5 of one
        beside = (read * 1.2, step * 3) if pays else (read * 10, step * 2)
        return Fixed(
            probe=probe,
            read=Average(read),
            step=Average(step),
            read_beside=Average(beside[0]),
            step_beside=Average(beside[1]),
            **kw,
        )

    monkeypatch.setattr(strategy_module, "PrefillPolicy", make)


def worker_prefills(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the prefill runs made on the worker thread (beside decode steps)."""
    found: list[int] = []
    run_decoder = Decoder.run

    def spy(decoder: Decoder, input_ids: Any, *args: Any) -> Any:
        if threading.current_thread().name.startswith("batch-prefill"):
            found.append(input_ids.shape[1])
        return run_decoder(decoder, input_ids, *args)

    monkeypatch.setattr(Decoder, "run", spy)
    return found


def expected(oracle: Any) -> list[str]:
    return [oracle.greedy(p, NEW, NEW)[0] for p in SHORT] + [oracle.greedy(LONG, 8)[0]]


def test_where_overlapping_pays_a_long_prompt_is_read_beside_the_decode_steps(
    oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    costs(monkeypatch, read=1 * MS, step=10 * MS, pays=True)  # 15 tokens per 1.5 steps
    beside = worker_prefills(monkeypatch)
    spy = Spy(monkeypatch)
    assert run(auto_config(), spy.long_prompt_while_others_decode()) == expected(oracle)
    chunks, _ = long_chunks(spy.calls)
    assert beside == chunks and sum(chunks) > 15


def test_where_it_does_not_pay_a_long_prompt_is_read_in_the_steps_in_chunks(
    oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    costs(monkeypatch, read=1 * MS, step=20 * MS, pays=False)  # 30 tokens per 1.5 steps
    beside = worker_prefills(monkeypatch)
    spy = Spy(monkeypatch)
    assert run(auto_config(), spy.long_prompt_while_others_decode()) == expected(oracle)
    chunks, window = long_chunks(spy.calls)
    assert not beside
    assert len(chunks) > 1 and all(n <= 30 for n in chunks), chunks
    # every step that reads a chunk decodes the rows too: nobody waits for the whole prompt
    for runs in window:
        assert sorted(kind for kind, _ in runs) == ["decode", "prefill"], window


def test_a_prompt_within_the_stall_is_read_whole_in_the_step(
    oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    costs(monkeypatch, read=0.01 * MS, step=10 * MS, pays=True)  # 1,500 tokens per 1.5 steps
    beside = worker_prefills(monkeypatch)
    spy = Spy(monkeypatch)
    assert run(auto_config(), spy.long_prompt_while_others_decode()) == expected(oracle)
    chunks, _ = long_chunks(spy.calls)
    prompt_tokens = next(c[1] for c in spy.calls if c[0] == "long prompt tokens")
    assert not beside and chunks == [prompt_tokens]


def test_where_it_does_not_pay_a_probe_reads_a_stall_sized_chunk_beside_the_steps(
    oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every 2nd declined chunk probes: beside the decode steps, but no bigger than the chunks
    # read in the steps, so a probe costs a short read, not the rest of the prompt.
    costs(monkeypatch, read=1 * MS, step=20 * MS, pays=False, probe=2)  # 30 tokens a chunk
    beside = worker_prefills(monkeypatch)
    spy = Spy(monkeypatch)
    assert run(auto_config(), spy.long_prompt_while_others_decode()) == expected(oracle)
    chunks, _ = long_chunks(spy.calls)
    assert beside and all(n <= 30 for n in beside), beside
    assert len(chunks) > len(beside) and all(n <= 30 for n in chunks), chunks


def test_the_debug_log_gives_each_step_its_rows_its_queue_and_the_policys_figures(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    costs(monkeypatch, read=1 * MS, step=10 * MS, pays=True)
    spy = Spy(monkeypatch)
    with caplog.at_level(logging.DEBUG, logger="genai.batch"):
        run(auto_config(), spy.long_prompt_while_others_decode())
    steps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    # the long prompt waits while the three short ones decode, then its read goes beside them
    assert any("3 decoding, 1 waiting, read in flight False; now 3, 0, True" in m for m in steps)
    assert all("prompt token 1.00 alone, 1.20 beside; decode step 10.00 alone" in m for m in steps)
