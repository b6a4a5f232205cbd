"""POST /v1/responses on the real demo model, when it says no: requests it cannot honour are
400s naming the field, harmless values of refused fields pass, an unknown model is 404, and a
timeout is an HTTP error or an error event, never a completed response."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import assert_error, make_client, wait_ready
from tests.routes.responses.helpers import ASK, WEATHER, create, stream

pytestmark = pytest.mark.model


# ---- refused -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"store": "yes"}, "store"),
        ({"previous_response_id": ""}, "previous_response_id"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"background": True}, "background"),
        ({"include": ["message.output_text.logprobs"]}, "include"),
        ({"include": ["everything"]}, "include.0"),
        ({"reasoning": {"effort": "maximal"}}, "reasoning.effort"),
        ({"reasoning": {"budget": 3}}, "reasoning.budget"),
        ({"service_tier": "gold"}, "service_tier"),
        ({"client_metadatas": {}}, "client_metadatas"),  # a typo is still caught
        ({"truncation": "auto"}, "truncation"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"tools": [{"type": "local_shell"}]}, "tools.0"),
        ({"tools": [{"type": "custom", "name": "patch"}]}, "tools.0"),
        ({"tools": [WEATHER], "tool_choice": {"type": "web_search_preview"}}, "tool_choice"),
        ({"tools": [WEATHER, WEATHER]}, "tools"),  # two functions of one name
        ({"tool_choice": "required"}, "tool_choice"),  # no tools
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        (
            {
                "tools": [WEATHER],
                "tool_choice": "required",
                "text": {"format": {"type": "json_object"}},
            },
            "tool_choice",
        ),
        ({"tools": [{"type": "function", "parameters": {}}]}, "tools.0.function.name"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input.0.content.0",  # the served model reads text only
        ),
        ({"input": [{"role": "tool", "content": "x"}]}, "input.0.message.role"),
        ({"input": []}, "input"),
        ({"input": 5}, "input"),
        ({"input": [{"type": "reasoning", "summary": []}]}, "input"),
        ({"text": {"format": {"type": "xml"}}}, "text.format"),
        ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format"),
        ({"text": {"verbosity": "loud"}}, "text.verbosity"),
        ({"stream_options": {"include_obfuscation": False}}, "stream_options"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_output_tokens": 100_000}, "max_output_tokens"),  # more than the context
        ({"metadata": {str(i): "v" for i in range(17)}}, "metadata"),
        ({"messages": [{"role": "user", "content": "x"}]}, "messages"),  # not this API's
    ],
)
def test_requests_that_cannot_be_honoured_are_400_naming_the_field(
    client: TestClient, extra: dict[str, Any], param: str
) -> None:
    resp = client.post("/v1/responses", json={"input": ASK, **extra})
    assert assert_error(resp, 400)["param"].startswith(param)


def test_harmless_values_of_refused_fields_are_accepted(client: TestClient) -> None:
    body = create(
        client,
        store=False,
        include=[],
        reasoning=None,
        truncation="disabled",
        service_tier="auto",
        prompt_cache_key="k",
        safety_identifier="s",
        max_tool_calls=3,
        max_output_tokens=2,
    )
    assert body["status"] == "incomplete"


def test_an_unknown_model_is_404(client: TestClient) -> None:
    assert_error(client.post("/v1/responses", json={"input": ASK, "model": "gpt-9"}), 404)


# ---- the server ends it ------------------------------------------------------------------
def test_a_timeout_is_an_http_error_or_an_error_event_never_a_completed_response() -> None:
    with make_client(request_timeout=1e-6) as timed:
        wait_ready(timed)
        resp = timed.post("/v1/responses", json={"input": ASK, "max_output_tokens": 12})
        assert assert_error(resp, 504)["code"] == "request_timeout"
        events = stream(timed, max_output_tokens=12)
    assert [e["type"] for e in events][:2] == ["response.created", "response.in_progress"]
    error = events[-1]
    assert error["type"] == "error" and error["code"] == "request_timeout" and error["message"]
    assert not any(e["type"] in ("response.completed", "response.incomplete") for e in events)
