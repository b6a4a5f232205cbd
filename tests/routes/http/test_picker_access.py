"""What the inference gateway's endpoint picker reaches without a key (it sends none): the
probes and their aliases always; /metrics with GENAI_METRICS_OPEN; the render routes with
GENAI_RENDER_OPEN; nothing else, whatever is opened."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import assert_error, make_client, wait_ready
from tests.routes.openai.helpers import MESSAGES, PROMPT

pytestmark = pytest.mark.model

KEY = "the-key"
RENDERS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/chat/completions/render", {"messages": MESSAGES}),
    ("/v1/completions/render", {"prompt": PROMPT}),
]
GUARDED: list[tuple[str, dict[str, Any] | None]] = [
    ("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 1}),
    ("/v1/models", None),
]


def status(client: Any, path: str, body: dict[str, Any] | None, key: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    method = "GET" if body is None else "POST"
    code: int = client.request(method, path, json=body, headers=headers).status_code
    return code


@pytest.mark.parametrize(
    ("settings", "metrics_open", "render_open"),
    [
        ({}, False, False),
        ({"metrics_open": True}, True, False),
        ({"render_open": True}, False, True),
        ({"metrics_open": True, "render_open": True}, True, True),
    ],
)
def test_each_setting_opens_its_paths_and_nothing_else(
    settings: dict[str, bool], metrics_open: bool, render_open: bool
) -> None:
    with make_client(api_key=KEY, **settings) as client:
        wait_ready(client)
        for path in ("/healthz", "/health", "/v1/health", "/readyz"):
            assert status(client, path, None) == 200, path
        assert status(client, "/metrics", None) == (200 if metrics_open else 401)
        for path, render in RENDERS:
            assert status(client, path, render) == (200 if render_open else 401), path
            assert status(client, path, render, KEY) == 200
        for path, body in GUARDED:
            assert_error(client.request("POST" if body else "GET", path, json=body), 401)
            assert status(client, path, body, KEY) == 200
        documented = client.get("/openapi.json").json()["paths"]
        assert ("security" in documented["/metrics"]["get"]) is not metrics_open
        render = documented["/v1/completions/render"]["post"]
        assert ("security" in render) is not render_open
        assert "security" not in documented["/health"]["get"]
