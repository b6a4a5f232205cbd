"""OnnxTextGenerator: the in-process client, on the real demo model, and its agreement with HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from backends.errors import ContextLengthExceeded
from backends.text_generator import OnnxTextGenerator
from schemas.settings import DEMO_MODEL_DIR
from tests.conftest import METRIC_KEYS, DirectGenerator

PROMPT = "Once upon a time"
MESSAGES = [{"role": "user", "content": "Name three rivers and a mountain."}]


@pytest.fixture(scope="module")
def generator() -> Iterator[OnnxTextGenerator]:
    with OnnxTextGenerator(model_dir=DEMO_MODEL_DIR) as gen:
        yield gen


def test_generate_raw_text_matches_the_oracle(
    generator: OnnxTextGenerator, oracle: DirectGenerator
) -> None:
    expected, tokens = oracle.greedy(PROMPT, 16)
    result = generator.generate(PROMPT, max_new_tokens=16, temperature=0)
    assert set(result) == {"generated_text", "tokens_generated", "finish_reason", "metrics"}
    assert result["generated_text"] == expected
    assert result["tokens_generated"] == len(tokens) == 16
    assert result["finish_reason"] == "length"
    assert set(result["metrics"]) == METRIC_KEYS
    assert result["metrics"]["input_tokens"] == len(oracle.tokenizer.encode(PROMPT))


def test_generate_messages_use_the_chat_template(
    generator: OnnxTextGenerator, oracle: DirectGenerator
) -> None:
    expected, _ = oracle.greedy(oracle.chat_prompt(MESSAGES), 12)
    result = generator.generate(MESSAGES, max_new_tokens=12, temperature=0)
    assert result["generated_text"] == expected


def test_stream_generate_yields_each_token_then_the_finish(generator: OnnxTextGenerator) -> None:
    whole = generator.generate(PROMPT, max_new_tokens=10, temperature=0)["generated_text"]
    items = list(generator.stream_generate(PROMPT, max_new_tokens=10, temperature=0))
    *tokens, (last_text, last) = items
    assert [meta["index"] for _, meta in tokens] == list(range(10))
    assert all(meta["finish_reason"] is None and "token_id" in meta for _, meta in tokens)
    assert "".join(text for text, _ in items) == whole
    assert last["finish_reason"] == "length"
    assert last["tokens_generated"] == 10
    assert set(last["metrics"]) == METRIC_KEYS


def test_stop_strings_end_the_text_before_them(
    generator: OnnxTextGenerator, oracle: DirectGenerator
) -> None:
    expected, _ = oracle.greedy(PROMPT, 20)
    stop = expected[6:9]
    cut = expected.find(stop)
    result = generator.generate(PROMPT, max_new_tokens=20, temperature=0, stop=[stop])
    assert result["generated_text"] == expected[:cut]
    assert result["finish_reason"] == "stop"


def test_seeded_sampling_is_reproducible(generator: OnnxTextGenerator) -> None:
    a = generator.generate(PROMPT, max_new_tokens=12, temperature=1.0, seed=11)
    b = generator.generate(PROMPT, max_new_tokens=12, temperature=1.0, seed=11)
    assert a["generated_text"] == b["generated_text"]


def test_leaving_a_stream_early_cancels_it(generator: OnnxTextGenerator) -> None:
    stream = generator.stream_generate(PROMPT, max_new_tokens=500)
    next(stream)
    stream.close()
    # The generation ends (cancelled) and the generator keeps serving.
    result = generator.generate(PROMPT, max_new_tokens=3, temperature=0)
    assert result["tokens_generated"] == 3


def test_errors_are_the_service_errors(generator: OnnxTextGenerator) -> None:
    with pytest.raises(ContextLengthExceeded, match="5000"):
        generator.generate(PROMPT, max_new_tokens=5000)


def test_close_is_idempotent_and_final() -> None:
    gen = OnnxTextGenerator(model_dir=DEMO_MODEL_DIR, default_max_tokens=4)
    assert gen.generate(PROMPT, temperature=0)["tokens_generated"] == 4
    gen.close()
    gen.close()
    with pytest.raises(RuntimeError, match="closed"):
        gen.generate(PROMPT)


def test_greedy_output_agrees_across_every_interface(
    client: TestClient, generator: OnnxTextGenerator
) -> None:
    """/v1/chat/completions, /v1/chat, /generate and OnnxTextGenerator: one model, one answer."""
    n = 16
    openai_chat = client.post(
        "/v1/chat/completions", json={"messages": MESSAGES, "temperature": 0, "max_tokens": n}
    ).json()["choices"][0]["message"]["content"]
    seed_chat = client.post(
        "/v1/chat", json={"messages": MESSAGES, "temperature": 0, "max_tokens": n}
    ).json()["content"]
    in_process_chat = generator.generate(MESSAGES, max_new_tokens=n, temperature=0)
    assert openai_chat == seed_chat == in_process_chat["generated_text"]
    assert openai_chat, "empty outputs would agree trivially"

    raw = client.post(
        "/generate", json={"prompt": PROMPT, "temperature": 0, "max_new_tokens": n}
    ).json()
    completion = client.post(
        "/v1/completions", json={"prompt": PROMPT, "temperature": 0, "max_tokens": n}
    ).json()["choices"][0]["text"]
    in_process = generator.generate(PROMPT, max_new_tokens=n, temperature=0)["generated_text"]
    assert raw["generated_text"] == completion == in_process
    assert raw["tokens_generated"] == n
