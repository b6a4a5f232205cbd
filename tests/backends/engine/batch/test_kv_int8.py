"""The batch engine on a model whose KV cache is int8 (tests/models/demo-kv8: the demo model's
weights exported with ``--kv-cache int8``, context trimmed to 4,096), where n-gram drafts are
both taken and missed because the demo copies from its context: greedy output with speculation
on is og.Generator's up to near-ties (int4 weights: tests/backends/engine/oracle_margins.py),
alone and together; and KV events tell the blocks an int8 row and the prefix store hold, as
they do on the float demo (tests/app/test_kv_events.py). Sharing, the store and ragged batches
on the int8 models are the parametrized cases of test_architectures.py and test_sharing.py."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from backends.types import KV_BLOCK_TOKENS
from config.settings import REPO_ROOT
from tests.app.test_kv_events import SYSTEM, Pod, chat, serve
from tests.backends.engine.batch.test_speculation import (
    LONG,
    PROMPTS,
    answers,
    every_row_drafts,  # noqa: F401 (autouse: every row drafts all it may, so verify runs run)
    spec_config,
)
from tests.backends.engine.oracle_margins import GreedyOracle, answer_ids, assert_near_tie
from tests.conftest import wait_ready
from tests.kv_subscriber import Subscriber

pytestmark = pytest.mark.model

DEMO_KV8 = REPO_ROOT / "tests" / "models" / "demo-kv8"


def drafted(caplog: pytest.LogCaptureFixture) -> tuple[int, int]:
    found = [
        re.search(r"drafted (\d+) tokens, accepted (\d+)", r.getMessage()) for r in caplog.records
    ]
    hits = [m for m in found if m]
    return sum(int(m[1]) for m in hits), sum(int(m[2]) for m in hits)


def test_the_folder_holds_an_int8_cache() -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(str(DEMO_KV8 / "model.onnx"), providers=["CPUExecutionProvider"])
    kinds = {i.type for i in session.get_inputs() if i.name.startswith("past_key_values.")}
    assert kinds == {"tensor(int8)"}
    config = json.loads((DEMO_KV8 / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True


@pytest.mark.parametrize("together", [False, True], ids=["alone", "together"])
def test_speculation_on_an_int8_cache_is_og_greedy(
    together: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="genai.batch")
    prompts = [*PROMPTS, LONG]
    oracle = GreedyOracle(DEMO_KV8)
    assert max(len(oracle.encode(p)) for p in prompts) > 600  # past the 512-token window
    follows = [oracle.follow(p, 60) for p in prompts]
    cfg = spec_config(DEMO_KV8, 8, prefill_chunk=32)
    results = answers(cfg, prompts, together, max_tokens=60)
    for row, (result, follow) in enumerate(zip(results, follows, strict=True)):
        got = answer_ids(result.choices[0])
        assert_near_tie(got, follow, oracle.tolerance, label=f"row {row}")
    drafts, accepted = drafted(caplog)
    assert 0 < accepted < drafts, (drafts, accepted)


@pytest.fixture()
def sub() -> Iterator[Subscriber]:
    sub = Subscriber("tcp://127.0.0.1", bind=True)
    yield sub
    sub.close()


def test_kv_events_tell_an_int8_rows_blocks_and_the_stores(sub: Subscriber) -> None:
    decoder = json.loads((DEMO_KV8 / "genai_config.json").read_text())["model"]["decoder"]
    per_token = 2 * decoder["num_hidden_layers"] * decoder["num_key_value_heads"]
    per_token *= decoder["head_size"]  # one byte a value
    store_mib = 10 * KV_BLOCK_TOKENS * per_token / 2**20  # ten blocks
    settings: dict[str, Any] = {"model_dir": DEMO_KV8, "prefix_store_mib": store_mib}
    with serve(sub, cache_sequences=0, **settings) as client:
        wait_ready(client)
        pod = Pod(client, sub)
        pod.cached_tokens(chat(SYSTEM, "Say hello."))
        pod.settle()
        assert pod.index.tiers() == {"CPU"}  # no row kept: its blocks went to the store
        again = chat(SYSTEM, "Name a colour, then a number.")
        predicted = pod.index.cached_blocks(pod.render(again))
        assert predicted >= 5  # the system prompt's blocks, held in ten blocks' bytes of int8
        assert pod.cached_tokens(again) == predicted * KV_BLOCK_TOKENS
