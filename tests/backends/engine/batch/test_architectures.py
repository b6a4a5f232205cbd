"""The batch engine on every decoder architecture the builder makes (tests/models/), against a
plain og.Generator loop on the same folder: greedy output equal token for token (on int4 models
up to near-ties: tests/backends/engine/oracle_margins.py), alone and with ragged rows arriving at
different times, including prompts longer than a sliding window. The ``*-kv8`` folders hold
their KV cache as int8 (``--kv-cache int8``)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backends.core.service import InferenceService
from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.backends.engine.batch.test_strategy import batch_config, greedy
from tests.backends.engine.helpers import run
from tests.backends.engine.oracle_margins import GreedyOracle, answer_ids, assert_near_tie

pytestmark = pytest.mark.model

MODELS = {
    "demo": DEMO_MODEL_DIR,  # Mistral-shaped, a 512-token window; demo-lora is the Llama
    **{p.name: p for p in sorted((REPO_ROOT / "tests" / "models").iterdir()) if p.is_dir()},
}
WORDS = "river mountain city road tree bird fish water fire the a of to".split()


def og_greedy(folder: Path, prompts: list[str], n: int) -> tuple[list[str], list[int]]:
    """The oracle: og.Generator, greedy, with the model's full context as its KV capacity
    (sliding-window models refuse capacities below their window)."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    eos = set(tokenizer.eos_token_ids)
    texts, lengths = [], []
    for prompt in prompts:
        ids = tokenizer.encode(prompt)
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=2048, do_sample=False)
        gen = og.Generator(model, params)
        gen.append_tokens(ids)
        stream, out, count = tokenizer.create_stream(), "", 0
        while count < n and not gen.is_done():
            gen.generate_next_token()
            token = int(gen.get_next_tokens()[0])
            if token in eos:
                break
            out += stream.decode(token)
            count += 1
        texts.append(out)
        lengths.append(len(np.asarray(ids)))
    return texts, lengths


@pytest.mark.parametrize("arch", sorted(MODELS))
def test_greedy_equals_og_generator(arch: str) -> None:
    folder = MODELS[arch]
    rng = random.Random(arch)
    # Prompt lengths up to ~3x a 64-token sliding window; chunks of 32 cross it mid-prompt.
    prompts = [" ".join(rng.choice(WORDS) for _ in range(n)) for n in (2, 20, 50, 90, 150, 300)]
    oracle = GreedyOracle(folder)
    lengths = [len(oracle.encode(p)) for p in prompts]
    assert max(lengths) > 128 and min(lengths) < 16
    follows = [oracle.follow(p, 30) for p in prompts]

    async def body(service: InferenceService) -> tuple[list[Any], list[Any]]:
        alone = [await greedy(service, p, 30) for p in prompts]
        runs = [greedy(service, p, 30, delay=0.003 * i) for i, p in enumerate(prompts)]
        return alone, list(await asyncio.gather(*runs))

    alone, together = run(batch_config(folder, prefill_chunk=32, cache_sequences=0), body)
    for label, results in (("alone", alone), ("together", together)):
        for row, (result, follow) in enumerate(zip(results, follows, strict=True)):
            got = answer_ids(result.choices[0])
            assert_near_tie(got, follow, oracle.tolerance, label=f"{arch} {label}, row {row}")
