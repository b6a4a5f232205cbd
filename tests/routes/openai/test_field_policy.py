"""The Chat Completions door's field policy (docs/api/field-policy.md): each accepted and mapped
field on the real demo model; what is refused is in test_chat_completions.py."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from routes.openai import serving
from schemas.openai import ChatCompletionRequest
from tests.conftest import assert_error
from tests.routes.openai.helpers import MESSAGES, chat

pytestmark = pytest.mark.model

ACCEPTED: list[dict[str, Any]] = [
    {"verbosity": "low"},
    {"store": False},
    {"metadata": {"ticket": "42"}},
    {"service_tier": "flex"},
    {"prompt_cache_key": "thread-1"},
    {"safety_identifier": "user-hash"},
    {"user": "someone"},
]


@pytest.mark.parametrize("extra", ACCEPTED, ids=lambda e: ",".join(e))
def test_accepted_fields_give_the_same_answer_as_without_them(
    client: TestClient, extra: dict[str, Any]
) -> None:
    plain = chat(client, temperature=0, max_tokens=6)
    body = chat(client, temperature=0, max_tokens=6, **extra)
    assert body["choices"][0]["message"] == plain["choices"][0]["message"]
    assert body["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]


@pytest.mark.parametrize(
    ("extra", "args"),
    [
        ({"reasoning_effort": "none"}, {"enable_thinking": False}),
        ({"reasoning_effort": "minimal"}, {"enable_thinking": False}),
        ({"reasoning_effort": "medium"}, {"enable_thinking": True}),
        (
            {"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}},
            {"enable_thinking": False},
        ),
        ({}, None),
    ],
)
def test_reasoning_effort_maps_to_the_templates_thinking_switch(
    extra: dict[str, Any], args: dict[str, Any] | None
) -> None:
    body = ChatCompletionRequest.model_validate({"messages": MESSAGES, **extra})
    chat_prompt = serving.chat_request(body, "r1").chat
    assert chat_prompt is not None and chat_prompt.template_args == args


def test_reasoning_effort_is_served(client: TestClient) -> None:
    body = chat(client, reasoning_effort="low", max_tokens=3, min_tokens=3)
    assert body["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"store": True}, "store"),
        ({"reasoning_effort": "maximal"}, "reasoning_effort"),
        ({"service_tier": "gold"}, "service_tier"),
        ({"web_search_options": {}}, "web_search_options"),
        ({"verbosityy": "low"}, "verbosityy"),  # a typo is still caught
    ],
)
def test_what_would_change_the_answer_is_refused_by_name(
    client: TestClient, extra: dict[str, Any], param: str
) -> None:
    resp = client.post("/v1/chat/completions", json={"messages": MESSAGES, **extra})
    assert_error(resp, 400, param)
