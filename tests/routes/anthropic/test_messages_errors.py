"""Anthropic's Messages API on the real demo model, when it says no: every error is in
Anthropic's shape (400s naming the problem, 404, 405, 413, a timeout mid-stream), x-api-key is
the key, and the API description lists the routes and their events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import DEMO_CONTEXT, make_client, wait_ready
from tests.routes.anthropic.helpers import ASK, MODEL, WEATHER, assert_anthropic_error, stream

pytestmark = pytest.mark.model


# ---- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        ({"max_tokens": None}, ["max_tokens", "required"]),
        ({"max_tokens": 0}, ["max_tokens"]),
        ({"temperature": 1.5}, ["temperature"]),
        ({"messages": []}, ["messages"]),
        ({"frequency_penalty": 1}, ["frequency_penalty", "not permitted"]),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            ["messages.0.content.0", "image", "source"],
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
            ["messages.0.content.0", "document", "text and images"],
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [{"type": "image"}],
                            }
                        ],
                    }
                ]
            },
            ["messages.0.content.0", "image"],
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
                    }
                ]
            },
            ["messages.0.content", "tool_use", "user turn"],
        ),
        ({"messages": [*ASK, {"role": "assistant", "content": "The"}]}, ["messages", "prefill"]),
        ({"messages": [{"role": "tool", "content": "x"}]}, ["messages.0.role"]),
        (
            {"tools": [{"type": "bash_20250124", "name": "bash"}]},
            ["tools.0", "bash_20250124"],
        ),
        (
            {"tools": [{"name": "f", "input_schema": {"type": "array"}}]},
            ["tools.0", "input_schema"],
        ),
        ({"tool_choice": {"type": "any"}}, ["tool_choice", "no tools"]),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}},
            ["tool_choice", "nope"],
        ),
        ({"tool_choice": {"type": "required"}}, ["tool_choice"]),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, ["budget_tokens", "max_tokens"]),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 100}, "max_tokens": 1500},
            ["budget_tokens"],
        ),
        ({"stop_sequences": [""]}, ["stop_sequences"]),
        (
            {"messages": [{"role": "user", "content": "go " * (DEMO_CONTEXT + 1000)}]},
            ["messages", str(DEMO_CONTEXT)],
        ),
    ],
)
def test_bad_requests_are_anthropic_400s_that_name_the_problem(
    client: TestClient, extra: dict[str, Any], fragments: list[str]
) -> None:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 16, **extra}
    body = {k: v for k, v in body.items() if v is not None}
    resp = client.post("/v1/messages", json=body)
    assert_anthropic_error(resp, 400, "invalid_request_error", *fragments)


def test_other_errors_are_anthropic_shaped_too(client: TestClient) -> None:
    body = {"model": "claude-opus-4", "messages": ASK, "max_tokens": 4}
    resp = client.post("/v1/messages", json=body)
    assert_anthropic_error(resp, 404, "not_found_error", "claude-opus-4")
    assert resp.json()["request_id"] == resp.headers["x-request-id"]
    resp = client.post(
        "/v1/messages/count_tokens", json={"model": "claude-opus-4", "messages": ASK}
    )
    assert_anthropic_error(resp, 404, "not_found_error")
    resp = client.post(
        "/v1/messages/count_tokens", json={"model": MODEL, "messages": ASK, "max_tokens": 3}
    )
    assert_anthropic_error(resp, 400, "invalid_request_error", "max_tokens")
    resp = client.post(
        "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_anthropic_error(resp, 400, "invalid_request_error", "JSON")
    assert_anthropic_error(client.get("/v1/messages"), 405, "invalid_request_error")
    assert_anthropic_error(client.post("/v1/messages/batches", json={}), 404, "not_found_error")
    # Other routes keep the one shape.
    resp = client.post("/v1/chat/completions", json={"messages": []})
    assert resp.status_code == 400 and set(resp.json()) == {"error"}


def test_a_stream_that_fails_after_it_started_ends_with_an_error_event() -> None:
    with make_client(request_timeout=1e-6) as c:
        wait_ready(c)
        events = stream(c, temperature=0, max_tokens=12)
        assert [e["type"] for e in events] == ["message_start", "ping", "error"]
        assert events[-1]["error"]["type"] == "timeout_error"
        assert "GENAI_REQUEST_TIMEOUT" in events[-1]["error"]["message"]
        resp = c.post("/v1/messages", json={"model": MODEL, "messages": ASK, "max_tokens": 12})
        assert_anthropic_error(resp, 504, "timeout_error", "GENAI_REQUEST_TIMEOUT")


def test_too_large_a_body_is_an_anthropic_413() -> None:
    with make_client(max_body_mib=0.001) as c:
        wait_ready(c)
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "x" * 4096}],
            "max_tokens": 2,
        }
        resp = c.post("/v1/messages", json=body)
        assert_anthropic_error(resp, 413, "request_too_large")
        assert c.post("/v1/completions", json=body).json()["error"]["code"] == "request_too_large"


# ---- auth --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed_client() -> Iterator[TestClient]:
    with make_client(api_key="first-key, second-key") as c:
        wait_ready(c)
        yield c


def test_x_api_key_is_accepted_as_the_key(keyed_client: TestClient) -> None:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 2}
    for headers in ({"x-api-key": "first-key"}, {"x-api-key": "second-key"}):
        assert keyed_client.post("/v1/messages", json=body, headers=headers).status_code == 200
        counted = {"model": MODEL, "messages": ASK}
        resp = keyed_client.post("/v1/messages/count_tokens", json=counted, headers=headers)
        assert resp.status_code == 200
        assert keyed_client.get("/v1/models", headers=headers).status_code == 200  # every route
    bearer = {"Authorization": "Bearer first-key"}
    assert keyed_client.post("/v1/messages", json=body, headers=bearer).status_code == 200
    for headers in ({}, {"x-api-key": "wrong"}, {"x-api-key": ""}, {"Authorization": "Bearer no"}):
        resp = keyed_client.post("/v1/messages", json=body, headers=headers)
        message = assert_anthropic_error(resp, 401, "authentication_error")
        assert ("x-api-key" in message) == (not any(headers.values()))
        assert resp.headers["www-authenticate"] == "Bearer"
        other = keyed_client.get("/v1/models", headers=headers)  # other routes: the one shape
        assert other.status_code == 401 and other.json()["error"]["code"] == "invalid_api_key"


def test_the_api_description_lists_the_routes_and_their_events(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    op = schema["paths"]["/v1/messages"]["post"]
    assert "text/event-stream" in op["responses"]["200"]["content"]
    assert op["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/AnthropicErrorResponse"
    )
    assert "/v1/messages/count_tokens" in schema["paths"]
    components = schema["components"]["schemas"]
    assert {"MessageStartEvent", "ContentBlockDeltaEvent", "MessageDeltaEvent"} <= set(components)
