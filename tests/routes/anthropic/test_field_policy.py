"""The Messages door's field policy (docs/api/field-policy.md): each accepted and mapped field
(what Claude Code sends on every request among them), server tools, and a max_tokens beyond
the context, on the real demo model."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backends.types import Usage
from routes.anthropic import serving
from schemas.anthropic import MessagesRequest
from tests.conftest import make_client, wait_ready
from tests.routes.anthropic.helpers import ASK, MODEL, WEATHER, fold, post, stream
from tests.routes.fakes import FakeHandle, end, run, said

pytestmark = pytest.mark.model

ACCEPTED: list[dict[str, Any]] = [
    {"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
    {"output_config": {"effort": "high"}},
    {"service_tier": "auto"},
    {"service_tier": "standard_only"},
    {"container": None},
    {"metadata": {"user_id": '{"device_id": "d", "session_id": "s"}'}},
    {"mcp_servers": [{"type": "url", "url": "https://example.com/mcp", "name": "wiki"}]},
]


def prompt_tokens(message: dict[str, Any]) -> int:
    usage = message["usage"]
    return int(usage["input_tokens"] + usage["cache_read_input_tokens"])


def _same_answer(client: TestClient, extra: dict[str, Any], **request: Any) -> None:
    plain = post(client, temperature=0, max_tokens=6)
    got = client.post(
        "/v1/messages",
        json={"model": MODEL, "messages": ASK, "temperature": 0, "max_tokens": 6, **extra},
        **request,
    )
    assert got.status_code == 200, got.text
    assert got.json()["content"] == plain["content"]
    assert prompt_tokens(got.json()) == prompt_tokens(plain)


@pytest.mark.parametrize("extra", ACCEPTED, ids=lambda e: ",".join(e))
def test_accepted_fields_give_the_same_answer_as_without_them(
    client: TestClient, extra: dict[str, Any]
) -> None:
    _same_answer(client, extra)


def test_the_beta_header_and_query_are_accepted(client: TestClient) -> None:
    """Claude Code posts to /v1/messages?beta=true with an anthropic-beta header."""
    betas = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
    _same_answer(
        client,
        {},
        headers={"anthropic-beta": betas, "anthropic-version": "2023-06-01"},
        params={"beta": "true"},
    )


@pytest.mark.parametrize(
    ("extra", "args"),
    [
        ({"output_config": {"effort": "low"}}, {"enable_thinking": True}),
        ({"output_config": {"effort": "max"}}, {"enable_thinking": True}),
        (
            {"output_config": {"effort": "high"}, "thinking": {"type": "disabled"}},
            {"enable_thinking": False},
        ),
        ({"output_config": {}}, None),
    ],
)
def test_output_config_effort_maps_to_the_templates_thinking_switch(
    extra: dict[str, Any], args: dict[str, Any] | None
) -> None:
    body = MessagesRequest.model_validate(
        {"model": MODEL, "messages": ASK, "max_tokens": 8, **extra}
    )
    chat = serving.messages_request(body, "r1").chat
    assert chat is not None and chat.template_args == args


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (
            {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},
            ["context_management.edits.0", "clear_tool_uses_20250919"],
        ),
        ({"container": "container_1"}, ["container"]),
        ({"output_config": {"effort": "huge"}}, ["output_config.effort"]),
        ({"output_config": {"format": {"type": "json_schema"}}}, ["output_config.format"]),
        ({"service_tier": "priority"}, ["service_tier"]),
        ({"context_managment": {}}, ["context_managment"]),  # a typo is still caught
    ],
)
def test_what_would_change_the_answer_is_refused_by_name(
    client: TestClient, extra: dict[str, Any], fragments: list[str]
) -> None:
    resp = client.post(
        "/v1/messages", json={"model": MODEL, "messages": ASK, "max_tokens": 8, **extra}
    )
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert all(f in error["message"] for f in fragments), error["message"]


# ---- server tools --------------------------------------------------------------------------
SERVER_TOOLS: list[dict[str, Any]] = [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    {"type": "web_fetch_20250910", "name": "web_fetch"},
    {"type": "code_execution_20250825", "name": "code_execution"},
    {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
    {"type": "mcp_toolset", "mcp_server_name": "wiki"},
]


def test_server_tools_are_left_out_of_the_prompt_and_logged_once(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    alone = post(client, tools=[WEATHER], max_tokens=1)
    with caplog.at_level(logging.INFO, logger="routes.anthropic.serving"):
        body = post(client, tools=[*SERVER_TOOLS, WEATHER], max_tokens=1)
    assert prompt_tokens(body) == prompt_tokens(alone)
    [line] = [r.getMessage() for r in caplog.records if "server tools" in r.getMessage()]
    assert all(t["type"] in line for t in SERVER_TOOLS)


def test_server_tools_alone_offer_no_tools(client: TestClient) -> None:
    body = post(client, tools=SERVER_TOOLS[:1], temperature=0, max_tokens=4)
    plain = post(client, temperature=0, max_tokens=4)
    assert prompt_tokens(body) == prompt_tokens(plain)


# ---- max_tokens beyond the context ---------------------------------------------------------
def test_max_tokens_beyond_the_room_left_is_reduced_to_it() -> None:
    """Claude Code asks for max_tokens 32000 whatever the model: the request is served, and
    reaching the context's end is model_context_window_exceeded."""
    with make_client(max_length=64) as small:
        wait_ready(small)
        body = {"max_tokens": 32000, "temperature": 0}
        for message in (post(small, **body), fold(stream(small, **body))):
            usage = message["usage"]
            room = 64 - usage["input_tokens"] - usage["cache_read_input_tokens"]
            assert 0 < usage["output_tokens"] <= room
            reached = usage["output_tokens"] == room
            assert message["stop_reason"] == (
                "model_context_window_exceeded" if reached else "end_turn"
            )


def test_the_context_limit_is_told_apart_from_max_tokens() -> None:
    request = MessagesRequest.model_validate({"model": MODEL, "messages": ASK, "max_tokens": 9})
    for limits, reason in (([5], "model_context_window_exceeded"), ([9], "max_tokens")):
        handle: Any = FakeHandle([said("a"), end("length")], usage_=Usage(7, 5, 0))
        handle.token_limits = limits
        assert run(serving.message_response(handle, request)).stop_reason == reason
