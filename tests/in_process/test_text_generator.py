"""OnnxTextGenerator: the in-process door, on the real demo model."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from backends.errors import ContextLengthExceeded, InvalidRequest
from config.settings import DEMO_MODEL_DIR
from in_process import OnnxTextGenerator
from tests.conftest import DEMO_CONTEXT, METRIC_KEYS, DirectGenerator

pytestmark = pytest.mark.model

PROMPT = "Once upon a time"
# The demo model soon ends a raw text with EOS: tests that need N tokens ask for at least N
# (min_new_tokens), and so does the oracle.
MESSAGES = [{"role": "user", "content": "Name three rivers and a mountain."}]


@pytest.fixture(scope="module")
def generator() -> Iterator[OnnxTextGenerator]:
    with OnnxTextGenerator(model_dir=DEMO_MODEL_DIR) as gen:
        yield gen


def test_generate_raw_text_matches_the_oracle(
    generator: OnnxTextGenerator, oracle: DirectGenerator
) -> None:
    expected, tokens = oracle.greedy(PROMPT, 16, 16)
    result = generator.generate(PROMPT, max_new_tokens=16, min_new_tokens=16, temperature=0)
    assert {"generated_text", "tokens_generated", "finish_reason", "metrics"} <= set(result)
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
    req = {"max_new_tokens": 10, "min_new_tokens": 10, "temperature": 0}
    whole = generator.generate(PROMPT, **req)["generated_text"]
    items = list(generator.stream_generate(PROMPT, **req))
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
    expected, _ = oracle.greedy(PROMPT, 20, 20)
    stop = expected[6:9]
    cut = expected.find(stop)
    result = generator.generate(
        PROMPT, max_new_tokens=20, min_new_tokens=20, temperature=0, stop=[stop]
    )
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
    result = generator.generate(PROMPT, max_new_tokens=3, min_new_tokens=3, temperature=0)
    assert result["tokens_generated"] == 3


def test_errors_are_the_service_errors(generator: OnnxTextGenerator) -> None:
    with pytest.raises(ContextLengthExceeded, match=str(DEMO_CONTEXT + 1000)):
        generator.generate(PROMPT, max_new_tokens=DEMO_CONTEXT + 1000)


def test_close_is_idempotent_and_final() -> None:
    gen = OnnxTextGenerator(model_dir=DEMO_MODEL_DIR, default_max_tokens=4)
    assert gen.generate(PROMPT, temperature=0, min_new_tokens=4)["tokens_generated"] == 4
    gen.close()
    gen.close()
    with pytest.raises(RuntimeError, match="closed"):
        gen.generate(PROMPT)


def test_n_choices_logprobs_and_usage(
    generator: OnnxTextGenerator, oracle: DirectGenerator
) -> None:
    expected, tokens = oracle.greedy(PROMPT, 6, 6)
    result = generator.generate(
        PROMPT,
        max_new_tokens=6,
        min_new_tokens=6,
        temperature=0,
        n=2,
        logprobs=True,
        top_logprobs=2,
    )
    assert [c["text"] for c in result["choices"]] == [expected, expected]
    assert result["usage"]["completion_tokens"] == 12
    assert result["usage"]["prompt_tokens"] == len(oracle.tokenizer.encode(PROMPT))
    for choice in result["choices"]:
        entries = choice["logprobs"]
        assert [e["token"] for e in entries] == [oracle.tokenizer.decode([t]) for t in tokens]
        assert all(e["top_logprobs"][0]["token"] == e["token"] for e in entries)


def test_json_schema_output(generator: OnnxTextGenerator) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    for seed in (1, 2):
        result = generator.generate(
            MESSAGES, max_new_tokens=40, temperature=0.7, seed=seed, json_schema=schema
        )
        assert isinstance(json.loads(result["generated_text"])["ok"], bool)


def test_stream_generate_reports_each_choice(generator: OnnxTextGenerator) -> None:
    items = list(
        generator.stream_generate(PROMPT, max_new_tokens=4, min_new_tokens=4, temperature=0, n=2)
    )
    finals = [meta for _, meta in items if meta["finish_reason"] is not None]
    assert sorted(m["choice"] for m in finals) == [0, 1]
    assert all(m["tokens_generated"] == 4 and m["finish_reason"] == "length" for m in finals)
    per_choice = ["".join(text for text, meta in items if meta["choice"] == c) for c in (0, 1)]
    assert per_choice[0] == per_choice[1] != ""


def test_an_unusable_schema_is_refused_naming_the_option(generator: OnnxTextGenerator) -> None:
    with pytest.raises(InvalidRequest) as exc:
        generator.generate(PROMPT, json_schema={"type": "nonsense"})
    assert exc.value.param == "json_schema" and "nonsense" in exc.value.message


def test_min_p_and_speculation_go_through_with_the_same_answer(
    generator: OnnxTextGenerator,
) -> None:
    ask = [{"role": "user", "content": "Repeat exactly: /data/notes-1/notes/test_moon/app.txt"}]
    off = {"num_speculative_tokens": 0}
    plain = generator.generate(ask, max_new_tokens=40, temperature=0, speculative=off)
    fast = generator.generate(
        ask, max_new_tokens=40, temperature=0, min_p=0.3, speculative={"method": "ngram"}
    )
    assert fast["generated_text"] == plain["generated_text"]
    assert 0 < fast["usage"]["accepted_tokens"] <= fast["usage"]["drafted_tokens"]
    assert "drafted_tokens" not in plain["usage"]
    with pytest.raises(ValueError, match="only method 'ngram'"):
        generator.generate(ask, speculative={"method": "eagle"})
