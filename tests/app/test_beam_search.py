"""Beam search (use_beam_search / best_of, vLLM's names) on a real full-attention model: the
returned choices equal a plain og.Generator beam search, token for token; what it cannot honour
is a 400 naming the field; the schedulers without it refuse it, and so does a sliding-window
model, where og's beam search fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from config.settings import REPO_ROOT
from tests.conftest import DirectGenerator, assert_error, make_client, wait_ready

pytestmark = pytest.mark.model

PROMPT = "Once upon a time there was a river"
# og's beam search needs full attention: a test model with the demo tokenizer and template.
FULL = REPO_ROOT / "tests" / "models" / "phi3"
SLIDING = REPO_ROOT / "tests" / "models" / "mistral"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with make_client(model_dir=FULL) as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="module")
def oracle() -> DirectGenerator:
    return DirectGenerator(FULL)


def og_beams(
    oracle: DirectGenerator, prompt: str, beams: int, returns: int, new: int, **options: Any
) -> list[str]:
    """The oracle: og's own beam search, the ``returns`` best beams' texts."""
    og, tokenizer = oracle.og, oracle.tokenizer
    ids = tokenizer.encode(prompt)
    params = og.GeneratorParams(oracle.model)
    params.set_search_options(
        max_length=oracle.max_length(len(ids) + new),
        num_beams=beams,
        num_return_sequences=returns,
        do_sample=False,
        **options,
    )
    gen = og.Generator(oracle.model, params)
    gen.append_tokens(ids)
    for _ in range(new):  # as the server: ``new`` search steps, or fewer if the search ends
        if gen.is_done():
            break
        gen.generate_next_token()
    eos = set(tokenizer.eos_token_ids)
    texts = []
    for i in range(returns):
        stream, text = tokenizer.create_stream(), ""
        for token in gen.get_sequence(i)[len(ids) :]:
            if int(token) in eos:
                break
            text += stream.decode(int(token))
        texts.append(text)
    return texts


@pytest.mark.parametrize(("beams", "n"), [(4, 2), (3, 3), (2, 1)])
def test_completions_return_og_s_best_beams(
    client: TestClient, oracle: DirectGenerator, beams: int, n: int
) -> None:
    expected = og_beams(oracle, PROMPT, beams, n, 24)
    body = {"prompt": PROMPT, "max_tokens": 24, "use_beam_search": True, "best_of": beams, "n": n}
    resp = client.post("/v1/completions", json=body)
    assert resp.status_code == 200, resp.text
    got = [c["text"] for c in sorted(resp.json()["choices"], key=lambda c: c["index"])]
    assert got == expected
    assert resp.json()["usage"]["completion_tokens"] > 0


def test_chat_beams_with_a_length_penalty(client: TestClient, oracle: DirectGenerator) -> None:
    messages = [{"role": "user", "content": "Name a river."}]
    expected = og_beams(oracle, oracle.chat_prompt(messages), 4, 2, 16, length_penalty=0.5)
    body = {
        "messages": messages,
        "max_tokens": 16,
        "use_beam_search": True,
        "best_of": 4,
        "n": 2,
        "length_penalty": 0.5,
    }
    resp = client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    got = [c["message"]["content"] for c in resp.json()["choices"]]
    assert got == expected and len(set(got)) == 2


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"stream": True}, "use_beam_search"),
        ({"best_of": 2, "n": 3}, "best_of"),
        ({"temperature": 0.7}, "temperature"),
        ({"logit_bias": {"5": 3}}, "logit_bias"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"logprobs": True}, "logprobs"),
    ],
)
def test_what_beam_search_cannot_honour_is_a_400(
    client: TestClient, extra: dict[str, Any], param: str
) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "use_beam_search": True, "best_of": 2}
    err = assert_error(client.post("/v1/chat/completions", json={**body, **extra}), 400)
    assert param in err["message"] or err["param"] == param


@pytest.mark.parametrize(
    "extra", [{"best_of": 3}, {"length_penalty": 0.5}, {"early_stopping": False}]
)
def test_beam_options_need_use_beam_search(client: TestClient, extra: dict[str, Any]) -> None:
    body = {"prompt": PROMPT, **extra}
    err = assert_error(client.post("/v1/completions", json=body), 400, next(iter(extra)))
    assert "use_beam_search" in err["message"]


@pytest.mark.parametrize("scheduler", ["batch", "generator"])
def test_every_cpu_scheduler_serves_beam_search(scheduler: str, oracle: DirectGenerator) -> None:
    # batch hands beam searches to a generator; a plain request stays with batch.
    with make_client(model_dir=FULL, scheduler=scheduler) as c:
        wait_ready(c)
        assert c.get("/readyz").json()["scheduler"] == scheduler
        body = {"prompt": PROMPT, "max_tokens": 16, "use_beam_search": True, "best_of": 3, "n": 2}
        got = [ch["text"] for ch in c.post("/v1/completions", json=body).json()["choices"]]
        assert got == og_beams(oracle, PROMPT, 3, 2, 16)
        greedy = c.post(
            "/v1/completions", json={"prompt": PROMPT, "max_tokens": 8, "temperature": 0}
        )
        assert greedy.json()["choices"][0]["text"] == oracle.greedy(PROMPT, 8)[0]


def test_the_engine_refuses_beam_search() -> None:
    with make_client(model_dir=FULL, scheduler="engine") as c:
        wait_ready(c)
        body = {"prompt": PROMPT, "use_beam_search": True, "best_of": 2}
        err = assert_error(c.post("/v1/completions", json=body), 400, "use_beam_search")
        assert "Beam search is not supported by the 'engine' scheduler" in err["message"]


@pytest.mark.parametrize("scheduler", ["batch", "generator", "engine"])
def test_a_sliding_window_model_refuses_beam_search(scheduler: str) -> None:
    with make_client(model_dir=SLIDING, scheduler=scheduler) as c:
        wait_ready(c)
        body = {"prompt": PROMPT, "max_tokens": 8, "use_beam_search": True, "best_of": 2}
        err = assert_error(c.post("/v1/completions", json=body), 400, "use_beam_search")
        assert "sliding-window" in err["message"]
        plain = c.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 8})
        assert plain.status_code == 200, plain.text
