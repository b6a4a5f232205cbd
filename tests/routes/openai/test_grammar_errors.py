"""Grammars on /v1/chat/completions that the engine cannot use or that fail while generating:
a 400 before anything runs, a 400 or an in-band error once it runs, never a 5xx; counted in
the metrics; and the server serves on (issue 17)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.conftest import (
    DirectGenerator,
    assert_error,
    make_client,
    metric,
    parse_sse,
    wait_ready,
)
from tests.routes.openai.helpers import MESSAGES, chat

pytestmark = pytest.mark.model


# ---- what the engine would reject is a 400 before anything runs ----------------------------------
def _deep_schema(levels: int) -> dict:
    schema: dict = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


HOSTILE_SCHEMAS = {
    "unknown type": {"type": "nonsense"},
    "type not a string": {"type": 123},
    "unclosed pattern": {"type": "string", "pattern": "(abc"},
    "400 levels": _deep_schema(400),
    # No finite instance: the grammar forces '{"a":{"a":...' without end (issue 17: was a 500).
    "recursive and required": {
        "type": "object",
        "properties": {"a": {"$ref": "#"}},
        "required": ["a"],
    },
    # Only a reference to itself: no output matches (it was a 200 with empty content).
    "only itself": {"$ref": "#"},
    "40k properties": {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(40_000)},
    },
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SCHEMAS))
@pytest.mark.parametrize("stream_", [False, True])
def test_a_schema_the_engine_cannot_use_is_a_400(client: TestClient, name: str, stream_) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": HOSTILE_SCHEMAS[name]}}
    body = {"messages": MESSAGES, "max_tokens": 4, "response_format": fmt, "stream": stream_}
    err = assert_error(client.post("/v1/chat/completions", json=body), 400, "response_format")
    assert err["type"] == "invalid_request_error"
    assert "llguidance" not in err["message"].lower() and "\n" not in err["message"]
    assert (
        client.post(
            "/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2}
        ).status_code
        == 200
    )


def test_a_recursive_schema_is_served(client: TestClient) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 5}, "child": {"$ref": "#"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "tree", "schema": schema}}
    body = chat(client, max_tokens=60, seed=1, response_format=fmt)
    assert body["choices"][0]["message"]["content"].startswith("{")


# A schema that starts fine and fails once the model took one branch: llguidance's limits are
# hit mid-generation. A 400 before a stream starts, an in-band error in one, counted, and the
# server serves on (issue 17).
LATE_FAILURE = {
    "anyOf": [{"type": "boolean"}, {"$ref": "#/$defs/r"}],
    "$defs": {
        "r": {"type": "object", "properties": {"a": {"$ref": "#/$defs/r"}}, "required": ["a"]}
    },
}


@pytest.mark.parametrize("scheduler", ["batch", "generator"])
def test_a_grammar_that_fails_mid_generation_is_a_400_or_in_band(
    scheduler: str, oracle: DirectGenerator
) -> None:
    brace = oracle.tokenizer.encode("{")[-1]  # pushed, so the model takes the object branch
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": LATE_FAILURE}}
    body = {
        "messages": MESSAGES,
        "max_tokens": 30,
        "response_format": fmt,
        "logit_bias": {str(brace): 100},
    }
    with make_client(scheduler=scheduler) as c:
        wait_ready(c)
        err = assert_error(c.post("/v1/chat/completions", json=body), 400)
        assert (err["type"], err["code"]) == ("invalid_request_error", "grammar_failed")
        assert "<state>" not in err["message"] and "\n" not in err["message"]
        with c.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as resp:
            assert resp.status_code == 200
            payloads = parse_sse(resp.iter_lines())
        assert "[DONE]" not in payloads
        assert json.loads(payloads[-1])["error"]["code"] == "grammar_failed"
        assert c.post(
            "/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2}
        ).is_success
        text = c.get("/metrics").text
        assert (
            metric(text, 'genai_requests_finished_total{model="onnx-genai",reason="grammar_error"}')
            == 2
        )
        failed = 'genai_grammar_failures_total{model="onnx-genai",stage='
        assert metric(text, failed + '"generation"}') == 2
        schema = HOSTILE_SCHEMAS["recursive and required"]
        refused = {
            **body,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "s", "schema": schema},
            },
        }
        assert_error(c.post("/v1/chat/completions", json=refused), 400, "response_format")
        assert metric(c.get("/metrics").text, failed + '"refused"}') == 1
