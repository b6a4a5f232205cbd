"""A model built with the logits of the last fed position only (tests/models/qwen2-last-logits:
the ``qwen2`` weights, byte for byte, with the builder's ``prune_lm_head``), as ``main_genai.py
export`` builds for the CPU: the batch engine's greedy output equals og.Generator's on it (and on
the unpruned build), with ragged rows in one batch and every way of reading a prompt; n-gram
speculation, which needs every position's logits, is off with a log line, a request asking for
it is told why, naming the field; og's Engine, which fails on such a graph, is refused at start."""

from __future__ import annotations

import asyncio
import logging
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.service import InferenceService
from backends.engine.batch.decoder import Decoder, read_spec, session_options
from backends.engine.batch.kv_cache import KVCache
from backends.errors import InvalidRequest, StartupError
from backends.models.folder import inspect_model_folder
from backends.types import Speculative
from config.settings import REPO_ROOT
from tests.backends.engine.batch.test_architectures import WORDS, og_greedy
from tests.backends.engine.batch.test_strategy import greedy
from tests.backends.engine.helpers import request, run, text
from tests.conftest import assert_error, make_client, wait_ready

pytestmark = pytest.mark.model

PRUNED = REPO_ROOT / "tests" / "models" / "qwen2-last-logits"
FULL = REPO_ROOT / "tests" / "models" / "qwen2"
N = 24


def prompts() -> list[str]:
    rng = random.Random(33)
    return [" ".join(rng.choice(WORDS) for _ in range(n)) for n in (1, 7, 33, 70, 140)]


def config(scheduler: str = "batch", path: Path = PRUNED, **model: Any) -> ServiceConfig:
    return ServiceConfig(
        ModelConfig(
            path,
            device="cpu",
            intra_op_threads=1,
            scheduler=scheduler,  # type: ignore[arg-type]
            cache_sequences=0,
            **model,
        ),
        Limits(),
    )


@pytest.fixture(scope="module")
def expected() -> list[str]:
    """og.Generator's greedy answers on the pruned model, which equal the unpruned one's."""
    assert inspect_model_folder(PRUNED).last_logits_only  # (tests/backends/models/test_folder.py)
    texts, lengths = og_greedy(PRUNED, prompts(), N)
    assert og_greedy(FULL, prompts(), N)[0] == texts
    assert len(set(lengths)) == len(lengths) and len(set(texts)) == len(texts)
    return texts


def decoder(path: Path) -> tuple[Decoder, KVCache]:
    import onnxruntime as ort

    folder = inspect_model_folder(path)
    options = session_options(ort, folder, 1)
    session = ort.InferenceSession(
        str(path / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    spec = read_spec(folder, {i.name: i.type for i in session.get_inputs()})
    return Decoder(spec, session, ort), KVCache(spec, 2, 64, ort)


def test_the_graph_gives_the_last_fed_positions_logits_and_refuses_padded_rows() -> None:
    (pruned, kv), (full, full_kv) = decoder(PRUNED), decoder(FULL)
    assert pruned.spec.last_logits_only and not full.spec.last_logits_only
    ids = np.arange(3, 12, dtype=np.int64)[None, :]
    ones, positions = np.ones_like(ids), np.arange(9)[None, :]
    last = pruned.run(ids, ones, positions, kv, (0, 1))
    every = full.run(ids, ones, positions, full_kv, (0, 1))
    assert last.shape == (1, 1, 1024) and every.shape == (1, 9, 1024)
    np.testing.assert_allclose(last[0, 0], every[0, -1], rtol=1e-4, atol=1e-4)
    assert last[0, 0].argmax() == every[0, -1].argmax()
    # Two rows in one run: one token each is fine, several each are refused.
    step = pruned.run(np.ones((2, 1), np.int64), np.ones((2, 10), np.int64), None, kv, (0, 2))
    assert step.shape == (2, 1, 1024)
    with pytest.raises(ValueError, match="padding"):
        pruned.run(np.ones((2, 3), np.int64), np.ones((2, 12), np.int64), None, kv, (0, 2))


@pytest.mark.parametrize(
    "reading",
    [
        {"prefill_overlap": False},  # in the step, between decode steps
        {"prefill_overlap": False, "step_tokens": 24},  # in chunks beside decode runs
        {"prefill_overlap": True},  # on a worker thread with half the threads
        {"prefill_overlap": "auto"},
    ],
    ids=["step", "budget", "overlap", "auto"],
)
def test_ragged_rows_in_one_batch_equal_og_generator(
    expected: list[str], reading: dict[str, Any]
) -> None:
    async def body(service: InferenceService) -> list[str]:
        runs = [greedy(service, p, N, delay=0.002 * i) for i, p in enumerate(prompts())]
        return [text(r) for r in await asyncio.gather(*runs)]

    assert run(config(prefill_chunk=32, **reading), body) == expected


@pytest.mark.parametrize("scheduler", ["batch", "generator"])
def test_speculation_is_off_with_a_log_line_and_a_request_is_told_why(
    expected: list[str], scheduler: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)

    async def body(service: InferenceService) -> tuple[list[str], InvalidRequest]:
        answers = [text(await greedy(service, p, N)) for p in prompts()[:2]]
        with pytest.raises(InvalidRequest) as refused:
            await service.submit(request(prompts()[0], max_tokens=N, speculative=Speculative()))
        off = request(prompts()[0], max_tokens=N, speculative=Speculative(0))
        answers.append(text(await (await service.submit(off)).result()))
        return answers, refused.value

    answers, refused = run(config(scheduler, speculative_tokens=8), body)
    assert answers == [*expected[:2], expected[0]]
    assert refused.param == "speculative" and "--all-logits" in str(refused)
    said = [r.getMessage() for r in caplog.records if "n-gram speculation is off" in r.getMessage()]
    assert len(said) == 1 and "GENAI_SPECULATIVE_TOKENS=8" in said[0], said
    assert not [r for r in caplog.records if re.search(r"drafted \d+ tokens", r.getMessage())]


def test_beam_search_goes_to_the_generator_which_runs_the_pruned_graph() -> None:
    async def body(service: InferenceService) -> list[str]:
        beams = await service.submit(request(prompts()[2], max_tokens=8, num_beams=2, n=2))
        return [c.text for c in (await beams.result()).choices]

    found = run(config(), body)
    assert found == run(config(path=FULL), body)
    assert len(found) == 2 and all(found)


def test_the_engine_scheduler_is_refused_at_start() -> None:
    async def start() -> None:
        service = InferenceService(config("engine"))
        try:
            await service.start()
        finally:
            await service.stop()

    with pytest.raises(StartupError, match="GENAI_SCHEDULER=engine.*--all-logits"):
        asyncio.run(start())


def test_a_request_asking_for_speculation_gets_a_400_naming_the_field() -> None:
    with make_client(model_dir=PRUNED, scheduler="batch") as client:
        wait_ready(client)
        body = {"messages": [{"role": "user", "content": "river"}], "max_tokens": 4}
        ask = {"method": "ngram", "num_speculative_tokens": 4}
        resp = client.post("/v1/chat/completions", json={**body, "speculative": ask})
        err = assert_error(resp, 400, "speculative")
        assert "last position" in err["message"] and "--all-logits" in err["message"]
        off = {**body, "speculative": {"num_speculative_tokens": 0}}
        assert client.post("/v1/chat/completions", json=off).status_code == 200
