"""/v1/completions through the real app and the real demo model: raw text continuation, prompts
of token ids, streams, stop strings, seeds and n, logprobs, the sampling fields, and what it
refuses."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import METRIC_KEYS, DirectGenerator, assert_error
from tests.routes.openai.helpers import EOS, PROMPT, complete, spanning_stop, stream

pytestmark = pytest.mark.model

# The demo model soon ends a raw text with EOS: tests that need N tokens send min_tokens = N,
# and the oracle masks EOS as long (og's min_length).


# ---- text continuation ---------------------------------------------------------------------------
def test_completion_is_raw_text_continuation(client: TestClient, oracle: DirectGenerator) -> None:
    expected, tokens = oracle.greedy(PROMPT, 20, 20)
    body = complete(client, temperature=0, max_tokens=20, min_tokens=20)
    assert body["id"].startswith("cmpl-")
    assert body["object"] == "text_completion"
    [choice] = body["choices"]
    assert choice["text"] == expected
    assert choice["finish_reason"] == "length"
    assert body["usage"]["prompt_tokens"] == len(oracle.tokenizer.encode(PROMPT))
    assert body["usage"]["completion_tokens"] == len(tokens)
    assert set(body["metrics"]) == METRIC_KEYS


def test_completion_stream_joins_to_the_same_text(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 0, "max_tokens": 12, "min_tokens": 12}
    whole = complete(client, **req)["choices"][0]["text"]
    chunks = stream(client, "/v1/completions", req)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert set(chunks[-1]["metrics"]) == METRIC_KEYS


def test_completion_stream_include_usage(client: TestClient) -> None:
    req = {
        "prompt": PROMPT,
        "temperature": 0,
        "max_tokens": 5,
        "min_tokens": 5,
        "stream_options": {"include_usage": True},
    }
    *rest, last = stream(client, "/v1/completions", req)
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 5
    assert last["metrics"]["output_tokens"] == 5
    assert rest[-1]["choices"][0]["finish_reason"] == "length" and rest[-1]["metrics"] is None


def test_completion_prompt_list_gives_n_choices_per_prompt(client: TestClient) -> None:
    body = complete(client, prompt=[PROMPT, "The river"], n=2, temperature=0, max_tokens=6)
    texts = [c["text"] for c in body["choices"]]
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    single = [
        complete(client, prompt=p, temperature=0, max_tokens=6)["choices"][0]["text"]
        for p in (PROMPT, "The river")
    ]
    assert texts == [single[0], single[0], single[1], single[1]]


# ---- token-id prompts ----------------------------------------------------------------------------
def test_a_prompt_of_token_ids_continues_as_its_text_does(
    client: TestClient, oracle: DirectGenerator
) -> None:
    ids = [int(t) for t in oracle.tokenizer.encode(PROMPT)]
    expected, tokens = oracle.greedy(PROMPT, 12, 12)
    body = complete(client, prompt=ids, temperature=0, max_tokens=12, min_tokens=12)
    assert body["choices"][0]["text"] == expected
    assert body["usage"]["prompt_tokens"] == len(ids)
    streamed = stream(client, "/v1/completions", {"prompt": ids, "temperature": 0,
                      "max_tokens": 12, "min_tokens": 12})  # fmt: skip
    assert "".join(c["choices"][0]["text"] for c in streamed) == expected


def test_several_prompts_of_token_ids_get_n_choices_each(client: TestClient) -> None:
    rendered = client.post("/v1/completions/render", json={"prompt": [PROMPT, "The river"]})
    first, second = (r["token_ids"] for r in rendered.json())
    body = complete(client, prompt=[first, second], n=2, temperature=0, max_tokens=6)
    texts = [c["text"] for c in body["choices"]]
    as_text = complete(client, prompt=[PROMPT, "The river"], temperature=0, max_tokens=6)
    assert texts == [as_text["choices"][0]["text"]] * 2 + [as_text["choices"][1]["text"]] * 2


def test_a_rendered_chat_round_trips_through_completions(client: TestClient) -> None:
    chat = {"messages": [{"role": "user", "content": "Hello!"}], "temperature": 0, "max_tokens": 8}
    ids = client.post("/v1/chat/completions/render", json=chat).json()["token_ids"]
    answer = client.post("/v1/chat/completions", json=chat).json()["choices"][0]["message"]
    body = complete(client, prompt=ids, temperature=0, max_tokens=8)
    assert body["choices"][0]["text"] == answer["content"]


@pytest.mark.parametrize(
    ("prompt", "where"),
    [([1, 2, 5000], "prompt[2] is 5000"), ([[1, 2], [3, 1024]], "prompt[1][1] is 1024")],
)
def test_a_token_id_outside_the_vocabulary_is_a_400_naming_where(
    client: TestClient, prompt: list, where: str
) -> None:
    err = assert_error(client.post("/v1/completions", json={"prompt": prompt}), 400, "prompt")
    assert err["message"].startswith(where) and "0 to 1023" in err["message"]


# ---- stop strings --------------------------------------------------------------------------------
def test_stop_string_spanning_tokens_is_cut(client: TestClient, oracle: DirectGenerator) -> None:
    # A prompt the demo model answers in words, not in one-letter tokens.
    prompt = "The river"
    stop, before = spanning_stop(oracle, prompt, 24, min_new_tokens=24)
    stops = ["never-there", stop]
    body = complete(client, prompt=prompt, temperature=0, max_tokens=24, min_tokens=24, stop=stops)
    [choice] = body["choices"]
    assert choice["text"] == before
    assert choice["finish_reason"] == "stop"


# ---- seeds and n ---------------------------------------------------------------------------------
def test_same_seed_same_output_and_choice_i_uses_seed_plus_i(client: TestClient) -> None:
    # The second run reuses the first's prefix and the n choices decode side by side: both
    # change the logits' last bits, which must not change a seeded draw (the sampler draws by
    # token id, tests/backends/engine/batch/test_sampler.py). min_tokens: no early end.
    req = {"prompt": PROMPT, "temperature": 1.0, "max_tokens": 12, "min_tokens": 12}
    a = complete(client, **req, seed=7)["choices"][0]["text"]
    b = complete(client, **req, seed=7)["choices"][0]["text"]
    assert a == b
    several = complete(client, **req, seed=7, n=3)["choices"]
    assert [c["index"] for c in several] == [0, 1, 2]
    alone = [complete(client, **req, seed=7 + i)["choices"][0]["text"] for i in range(3)]
    assert [c["text"] for c in several] == alone
    assert several[0]["text"] == a
    assert len(set(alone)) > 1  # the seeds did draw differently


def test_different_seeds_sample_differently(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 1.5, "max_tokens": 16}
    texts = {complete(client, **req, seed=s)["choices"][0]["text"] for s in range(4)}
    assert len(texts) > 1


# ---- logprobs ------------------------------------------------------------------------------------
def test_completion_logprobs_shape(client: TestClient) -> None:
    body = complete(client, temperature=0, max_tokens=6, min_tokens=6, logprobs=2)
    [choice] = body["choices"]
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 6
    assert all(len(alts) <= 2 and alts for alts in lp["top_logprobs"])
    assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0
    assert all(x <= 0 for x in lp["token_logprobs"])


# ---- penalties, bias, min_tokens -----------------------------------------------------------------
def test_logit_bias_forces_and_bans_tokens(client: TestClient, oracle: DirectGenerator) -> None:
    forced = oracle.tokenizer.encode(" river")[-1]
    body = complete(client, temperature=0, max_tokens=5, logprobs=0, logit_bias={str(forced): 100})
    assert body["choices"][0]["logprobs"]["tokens"] == [oracle.tokenizer.decode([forced])] * 5
    _, greedy = oracle.greedy(PROMPT, 1)
    banned = complete(
        client, temperature=0, max_tokens=1, logprobs=0, logit_bias={str(greedy[0]): -100}
    )
    assert banned["choices"][0]["logprobs"]["tokens"] != [oracle.tokenizer.decode([greedy[0]])]


def test_min_tokens_holds_back_eos(client: TestClient) -> None:
    eager = {"temperature": 0, "max_tokens": 20, "logit_bias": {str(EOS): 100}}
    assert complete(client, **eager)["usage"]["completion_tokens"] == 0
    body = complete(client, **eager, min_tokens=5)
    assert body["usage"]["completion_tokens"] == 5
    assert body["choices"][0]["finish_reason"] == "stop"


def test_presence_and_frequency_penalties_reduce_repeats(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 0, "max_tokens": 40, "min_tokens": 40, "logprobs": 0}
    plain = complete(client, **req)["choices"][0]["logprobs"]["tokens"]
    penalised = complete(client, **req, presence_penalty=2.0, frequency_penalty=2.0)
    tokens = penalised["choices"][0]["logprobs"]["tokens"]
    assert len(tokens) - len(set(tokens)) <= len(plain) - len(set(plain))
    assert tokens != plain


def test_repetition_penalty_changes_greedy_output(client: TestClient) -> None:
    req = {"prompt": PROMPT, "temperature": 0, "max_tokens": 40, "min_tokens": 40}
    plain = complete(client, **req)["choices"][0]["text"]
    assert complete(client, **req, repetition_penalty=1.0)["choices"][0]["text"] == plain
    assert complete(client, **req, repetition_penalty=1.8)["choices"][0]["text"] != plain


# ---- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "param"),
    [({"echo": True}, "echo"), ({"suffix": "end"}, "suffix")],
)
def test_unsupported_completion_fields_are_refused(client: TestClient, extra, param) -> None:
    err = assert_error(client.post("/v1/completions", json={"prompt": PROMPT, **extra}), 400, param)
    assert "not supported" in err["message"]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logprobs": 6}, "logprobs"),
        ({"echo": 0}, "echo"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"prompt": [1, -2]}, "prompt"),  # token ids are from 0
        ({"prompt": [True]}, "prompt"),  # nor booleans
        ({"prompt": [[1, 2], "text"]}, "prompt"),  # nor ids and text mixed
        ({"logit_bias": {"999999": 1}}, "logit_bias"),
    ],
)
def test_bad_completion_parameters_are_400(client: TestClient, extra, param) -> None:
    resp = client.post("/v1/completions", json={"prompt": PROMPT, **extra})
    assert assert_error(resp, 400)["param"].startswith(param)


def test_top_k_beyond_the_vocabulary_is_a_400(client: TestClient) -> None:
    err = assert_error(
        client.post("/v1/completions", json={"prompt": PROMPT, "top_k": 5000, "temperature": 1}),
        400,
        "top_k",
    )
    assert "1024" in err["message"]
