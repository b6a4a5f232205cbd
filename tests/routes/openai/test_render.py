"""The render routes (vLLM's, which the inference gateway's endpoint picker calls to tokenize as
the server does): for the very body a generation route takes, the token ids the core feeds the
model, counted by that route's ``usage.prompt_tokens``; nothing is generated."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import assert_error, metric
from tests.routes.openai.helpers import MESSAGES, PROMPT
from tests.routes.openai.test_tools import WEATHER

pytestmark = pytest.mark.model

HISTORY = [
    *MESSAGES,
    {"role": "assistant", "content": "The Nile, the Rhine, the Amazon; and Mont Blanc."},
    {"role": "user", "content": "And a lake?"},
]


def rendered(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def prompt_tokens(client: TestClient, path: str, body: dict[str, Any]) -> int:
    response = client.post(path, json={**body, "max_tokens": 1, "temperature": 0})
    assert response.status_code == 200, response.text
    count: int = response.json()["usage"]["prompt_tokens"]
    return count


@pytest.mark.parametrize(
    "body",
    [
        {"messages": MESSAGES},
        {"messages": HISTORY},
        {"messages": MESSAGES, "tools": [WEATHER]},  # the tools go into the template
        {"messages": MESSAGES, "tools": [WEATHER], "tool_choice": "none"},  # and here they don't
        {"messages": MESSAGES, "chat_template_kwargs": {"add_generation_prompt": False}},
    ],
    ids=["chat", "history", "tools", "tools-none", "no-generation-prompt"],
)
def test_a_chat_renders_to_the_tokens_its_completion_counts(
    client: TestClient, body: dict[str, Any]
) -> None:
    ids = rendered(client, "/v1/chat/completions/render", body)["token_ids"]
    assert ids and all(isinstance(t, int) for t in ids)
    assert len(ids) == prompt_tokens(client, "/v1/chat/completions", body)


def test_tools_change_the_rendered_tokens(client: TestClient) -> None:
    plain = rendered(client, "/v1/chat/completions/render", {"messages": MESSAGES})
    tools = rendered(
        client, "/v1/chat/completions/render", {"messages": MESSAGES, "tools": [WEATHER]}
    )
    none = {"messages": MESSAGES, "tools": [WEATHER], "tool_choice": "none"}
    assert len(tools["token_ids"]) > len(plain["token_ids"])
    assert rendered(client, "/v1/chat/completions/render", none) == plain  # "none": no tools


def test_completions_render_one_entry_per_prompt(client: TestClient) -> None:
    prompts = [PROMPT, "The river runs to the city and the"]
    found = rendered(client, "/v1/completions/render", {"prompt": prompts})
    assert [list(entry) for entry in found] == [["token_ids"], ["token_ids"]]
    for prompt, entry in zip(prompts, found, strict=True):
        assert len(entry["token_ids"]) == prompt_tokens(
            client, "/v1/completions", {"prompt": prompt}
        )
    both = prompt_tokens(client, "/v1/completions", {"prompt": prompts})
    assert both == sum(len(entry["token_ids"]) for entry in found)
    # The tokens are the prompt's, as /tokenize (vLLM's and llama-server's route) gives them.
    tokenized = client.post("/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    assert found[0]["token_ids"] == tokenized


def test_rendering_generates_nothing_and_takes_the_generation_body_whole(
    client: TestClient,
) -> None:
    before = metric(client.get("/metrics").text, "genai_requests_finished_total")
    body = {"messages": MESSAGES, "max_tokens": 64, "stream": True, "n": 2, "temperature": 0.7}
    rendered(client, "/v1/chat/completions/render", body)
    rendered(client, "/v1/completions/render", {"prompt": PROMPT, "stream": True, "logprobs": 2})
    assert metric(client.get("/metrics").text, "genai_requests_finished_total") == before


@pytest.mark.parametrize(
    ("path", "body", "status", "param"),
    [
        ("/v1/chat/completions/render", {"messages": MESSAGES, "model": "nope"}, 404, "model"),
        ("/v1/completions/render", {"prompt": PROMPT, "model": "nope"}, 404, "model"),
        ("/v1/chat/completions/render", {"messages": []}, 400, None),
        ("/v1/completions/render", {"prompt": ""}, 400, None),
        (
            "/v1/chat/completions/render",
            {"messages": MESSAGES, "tool_choice": "required"},
            400,
            None,
        ),
    ],
)
def test_what_a_generation_route_refuses_render_refuses_alike(
    client: TestClient, path: str, body: dict[str, Any], status: int, param: str | None
) -> None:
    err = assert_error(client.post(path, json=body), status, param)
    generate = path.removesuffix("/render")
    same = assert_error(client.post(generate, json=body), status, param)
    assert err["type"] == same["type"]
