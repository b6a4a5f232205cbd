"""Sliding-window models on the ``generator`` strategy.

The committed Mistral and Gemma-2 test models (64-token windows): a request whose prompt and
answer fit in fewer positions than the window still gets a KV cache of the window
(onnxruntime's attention refuses less), here a seeded one, which reuses no cache and so used
to ask for exactly what it needs and fail.

The demo model (a 512-token window): once a sequence has passed the window, og.Generator's
cache has dropped positions and rewinds to none at all, so a held sequence is reused only by a
prompt that goes on from its end; the same prompt again is read afresh (it used to fail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.service import InferenceService
from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.backends.engine.helpers import request, run
from tests.conftest import DirectGenerator, make_client, wait_ready

pytestmark = pytest.mark.model

MODELS = REPO_ROOT / "tests" / "models"


@pytest.mark.parametrize("name", ["mistral", "gemma2"])
def test_a_short_seeded_request_on_a_sliding_window_model(name: str) -> None:
    folder = MODELS / name
    assert 0 < _window(folder) <= 64  # far more than the 2-token prompt and 4 tokens asked
    cfg = ServiceConfig(
        ModelConfig(folder, device="cpu", intra_op_threads=1, scheduler="generator"), Limits()
    )

    async def body(service: InferenceService) -> list[tuple[str, int]]:
        out = []
        for _ in range(2):
            handle = await service.submit(
                request("hello there", max_tokens=4, temperature=0.8, seed=7, min_new_tokens=4)
            )
            result = await handle.result()
            out.append((result.choices[0].text, result.choices[0].completion_tokens))
        return out

    first, again = run(cfg, body)
    assert first[1] == 4 and first == again  # all four tokens, and the seed holds


def test_a_prompt_again_after_its_sequence_passed_the_window(oracle: DirectGenerator) -> None:
    words = "the river runs past the old mill and the miller counts his bags of grain".split()
    messages = [{"role": "user", "content": " ".join(words[i % 15] for i in range(280))}]
    prompt = oracle.chat_prompt(messages)
    # past the window and og's slack on the CPU (16 positions): its first positions are gone
    assert len(oracle.tokenizer.encode(prompt)) > _window(DEMO_MODEL_DIR) + 16
    next_turn = [
        *messages,
        {"role": "assistant", "content": "the mill"},
        {"role": "user", "content": "and then the miller"},
    ]
    body = {"messages": messages, "max_tokens": 40, "temperature": 0}
    url = "/v1/chat/completions"
    with make_client(scheduler="generator") as client:
        wait_ready(client)
        first = client.post(url, json=body)
        assert first.status_code == 200, first.text
        again = client.post(url, json={**body, "logprobs": True})
        assert again.status_code == 200, again.text  # was a 500: "Cannot rewind to ..."
        # A sequence held with exactly the prompt (one token asked) goes on from its end,
        # which needs no rewind: the next turn reuses it.
        assert client.post(url, json={**body, "max_tokens": 1}).status_code == 200
        following = client.post(url, json={**body, "messages": next_turn})
        assert following.status_code == 200, following.text

    answer = again.json()["choices"][0]
    assert again.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # read afresh
    text, tokens = oracle.greedy(prompt, 40)
    assert answer["message"]["content"] == text
    assert [e["token"] for e in answer["logprobs"]["content"]] == [
        oracle.tokenizer.decode([t]) for t in tokens
    ]
    reused = following.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert reused == first.json()["usage"]["prompt_tokens"]
    expected, _ = oracle.greedy(oracle.chat_prompt(next_turn), 40)
    assert following.json()["choices"][0]["message"]["content"] == expected


def _window(folder: Path) -> int:
    from backends.models.folder import inspect_model_folder

    return inspect_model_folder(folder).sliding_window
