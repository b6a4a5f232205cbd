"""The Responses door's field policy (docs/api/field-policy.md): each accepted and mapped field,
namespace tools and hosted tools, on the real demo model. What it refuses is in
test_responses_errors.py (``test_requests_that_cannot_be_honoured_are_400_naming_the_field``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backends.core.handle import ChoiceDelta
from routes.responses import serving
from routes.responses.builder import ResponseBuilder
from schemas.responses import ResponsesRequest
from tests.conftest import assert_error
from tests.routes.responses.helpers import (
    ASK,
    TIME,
    WEATHER,
    FakeHandle,
    calls_of,
    create,
    stream,
)

pytestmark = pytest.mark.model

# Every field a client may send that is accepted and has no effect here (each with a value a
# real client sends), one row of the policy table each.
ACCEPTED: list[dict[str, Any]] = [
    {"include": ["reasoning.encrypted_content"]},
    {
        "include": [
            "web_search_call.action.sources",
            "web_search_call.results",
            "file_search_call.results",
            "code_interpreter_call.outputs",
            "computer_call_output.output.image_url",
            "message.input_image.image_url",
        ]
    },
    {"reasoning": {"summary": "auto"}},
    {"reasoning": {"generate_summary": "concise"}},
    {"client_metadata": {"session_id": "s1", "x-codex-turn-metadata": '{"a": 1}'}},
    {"prompt_cache_key": "01a2-thread"},
    {"safety_identifier": "user-hash"},
    {"service_tier": "priority"},
    {"service_tier": "auto"},
    {"text": {"verbosity": "low"}},
    {"store": False},
    {"truncation": "disabled"},
    {"user": "u1"},
    {"max_tool_calls": 3},
]


@pytest.mark.parametrize("extra", ACCEPTED, ids=lambda e: ",".join(e))
def test_accepted_fields_give_the_same_answer_as_without_them(
    client: TestClient, extra: dict[str, Any]
) -> None:
    plain = create(client, temperature=0, max_output_tokens=6)
    body = create(client, temperature=0, max_output_tokens=6, **extra)
    assert body["output"][0]["content"] == plain["output"][0]["content"]
    assert body["usage"]["input_tokens"] == plain["usage"]["input_tokens"]


def test_encrypted_reasoning_asked_for_comes_back_absent() -> None:
    """``include: ["reasoning.encrypted_content"]`` (Codex sends it on every request): the
    reasoning item is there, without ``encrypted_content``; nothing is an error."""
    body = ResponsesRequest.model_validate(
        {"input": ASK, "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto"}}
    )
    builder = ResponseBuilder(FakeHandle(), body)  # type: ignore[arg-type]
    builder.feed(ChoiceDelta(0, "", None, reasoning="hm"))
    builder.feed(ChoiceDelta(0, "ok", None, finish_reason="stop", last=True))
    response = builder.response().model_dump()
    reasoning = response["output"][0]
    assert reasoning["type"] == "reasoning"
    assert reasoning.get("encrypted_content") is None


@pytest.mark.parametrize(
    ("effort", "thinking"),
    [("none", False), ("minimal", False), ("low", True), ("medium", True), ("high", True)],
)
def test_reasoning_effort_maps_to_the_templates_thinking_switch(
    effort: str, thinking: bool
) -> None:
    body = ResponsesRequest.model_validate({"input": ASK, "reasoning": {"effort": effort}})
    chat = serving.responses_request(body, "r1").chat
    assert chat is not None and chat.template_args == {"enable_thinking": thinking}


def test_chat_template_kwargs_win_over_the_effort() -> None:
    body = ResponsesRequest.model_validate(
        {
            "input": ASK,
            "reasoning": {"effort": "high"},
            "chat_template_kwargs": {"enable_thinking": False, "x": 1},
        }
    )
    chat = serving.responses_request(body, "r1").chat
    assert chat is not None and chat.template_args == {"enable_thinking": False, "x": 1}


def test_reasoning_effort_is_served(client: TestClient) -> None:
    body = create(client, reasoning={"effort": "low", "summary": "auto"}, max_output_tokens=4)
    assert body["usage"]["output_tokens"] == 4


# ---- namespace tools ---------------------------------------------------------------------
AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Tools for sub-agents.",
    "tools": [{**TIME, "name": "close_agent"}],
}


def test_a_namespaced_function_is_offered_by_its_name_and_called_with_its_namespace(
    client: TestClient,
) -> None:
    forced = {
        "tools": [WEATHER, AGENTS],
        "tool_choice": {"type": "function", "name": "close_agent"},
        "parallel_tool_calls": False,
        "seed": 3,
        "max_output_tokens": 200,
    }
    body = create(client, **forced)
    [call] = calls_of(body)
    assert (call["name"], call["namespace"]) == ("close_agent", "multi_agent_v1")
    assert json.loads(call["arguments"])["zone"] in ("UTC", "CET")
    tools = body["tools"]  # as the client gave them
    assert [(t["type"], t["name"]) for t in tools] == [
        ("function", "get_weather"),
        ("namespace", "multi_agent_v1"),
    ]
    assert tools[1]["tools"][0]["name"] == "close_agent"
    done = [e for e in stream(client, **forced) if e["type"] == "response.output_item.done"]
    assert done[-1]["item"]["namespace"] == "multi_agent_v1"
    # The call goes back as the client got it; the answer continues the conversation.
    history = [
        {"role": "user", "content": ASK},
        {k: call[k] for k in ("type", "call_id", "name", "namespace", "arguments")},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "closed"},
    ]
    after = create(client, input=history, tools=[WEATHER, AGENTS], max_output_tokens=4)
    assert after["usage"]["input_tokens"] > body["usage"]["input_tokens"]


def test_a_plain_function_call_has_no_namespace(client: TestClient) -> None:
    body = create(
        client,
        tools=[WEATHER, AGENTS],
        tool_choice={"type": "function", "name": "get_weather"},
        seed=1,
        max_output_tokens=200,
    )
    [call] = calls_of(body)
    assert call["name"] == "get_weather" and call.get("namespace") is None


def test_a_namespace_shows_the_model_what_the_same_functions_flat_show(
    client: TestClient,
) -> None:
    nested = create(client, tools=[AGENTS], max_output_tokens=1)
    flat = create(client, tools=AGENTS["tools"], max_output_tokens=1)
    assert nested["usage"]["input_tokens"] == flat["usage"]["input_tokens"]


# ---- hosted tools ------------------------------------------------------------------------
HOSTED: list[dict[str, Any]] = [
    {"type": "web_search", "external_web_access": False},
    {"type": "web_search_preview"},
    {"type": "file_search", "vector_store_ids": ["vs_1"]},
    {"type": "code_interpreter", "container": {"type": "auto"}},
    {"type": "computer_use_preview", "display_width": 1, "display_height": 1},
    {"type": "image_generation"},
    {"type": "mcp", "server_label": "deepwiki", "server_url": "https://example.com/mcp"},
]


def test_hosted_tools_are_left_out_of_the_prompt_and_the_response_and_logged_once(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    alone = create(client, tools=[WEATHER], max_output_tokens=1)
    with caplog.at_level(logging.INFO, logger="routes.responses.serving"):
        body = create(client, tools=[*HOSTED, WEATHER], max_output_tokens=1)
    assert body["usage"]["input_tokens"] == alone["usage"]["input_tokens"]
    assert [t["name"] for t in body["tools"]] == ["get_weather"]
    [line] = [r.getMessage() for r in caplog.records if "hosted tools" in r.getMessage()]
    assert all(t["type"] in line for t in HOSTED)


def test_hosted_tools_alone_offer_no_tools(client: TestClient) -> None:
    body = create(client, tools=HOSTED[:1], temperature=0, max_output_tokens=4)
    plain = create(client, temperature=0, max_output_tokens=4)
    assert body["tools"] == [] and body["tool_choice"] == "auto"
    assert body["usage"]["input_tokens"] == plain["usage"]["input_tokens"]


@pytest.mark.parametrize(
    "choice",
    [{"type": "web_search_preview"}, {"type": "file_search"}, {"type": "mcp", "server_label": "x"}],
)
def test_forcing_a_hosted_tool_is_a_400_naming_it(
    client: TestClient, choice: dict[str, Any]
) -> None:
    resp = client.post(
        "/v1/responses", json={"input": ASK, "tools": [*HOSTED, TIME], "tool_choice": choice}
    )
    error = assert_error(resp, 400)
    assert error["param"] == "tool_choice" and f"'{choice['type']}'" in error["message"]
