"""API keys and CORS, over the real app: every API route needs the key when one is set, probes
and docs stay open, and CORS answers only the configured origins (a 401 included)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import assert_error, make_client, wait_ready
from tests.routes.openai.helpers import MESSAGES, PROMPT

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def keyed_client():
    with make_client(api_key="first-key, second-key") as c:
        wait_ready(c)
        yield c


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/models", None),
        ("POST", "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 2}),
        ("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2}),
        ("POST", "/v1/chat", {"messages": MESSAGES, "max_tokens": 2}),
        ("POST", "/generate", {"prompt": PROMPT, "max_new_tokens": 2}),
        ("GET", "/metrics", None),
    ],
)
def test_every_api_route_needs_a_key_when_one_is_set(
    keyed_client: TestClient, method, path, body
) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic Zmlyc3Qta2V5"}):
        resp = keyed_client.request(method, path, json=body, headers=headers)
        err = assert_error(resp, 401)
        assert err["type"] == "authentication_error"
        assert resp.headers["www-authenticate"] == "Bearer"
    for key in ("first-key", "second-key"):
        resp = keyed_client.request(
            method, path, json=body, headers={"Authorization": f"Bearer {key}"}
        )
        assert resp.status_code == 200, resp.text


def test_probes_and_docs_stay_open(keyed_client: TestClient) -> None:
    assert keyed_client.get("/healthz").status_code == 200
    assert keyed_client.get("/readyz").status_code == 200
    assert keyed_client.get("/docs").status_code == 200
    schema = keyed_client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    chat_op = schema["paths"]["/v1/chat/completions"]["post"]
    assert chat_op["security"] == [{"apiKey": []}] and "401" in chat_op["responses"]
    assert "security" not in schema["paths"]["/healthz"]["get"]


def test_no_key_means_open_and_no_cors_by_default(client: TestClient) -> None:
    resp = client.get("/v1/models", headers={"Origin": "https://example.org"})
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers


def test_cors_origins_are_allowed_when_configured() -> None:
    with make_client(cors_origins="https://ui.example.org", api_key="k") as c:
        preflight = c.options(
            "/v1/chat/completions",
            headers={
                "Origin": "https://ui.example.org",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://ui.example.org"
        denied = c.get("/v1/models", headers={"Origin": "https://evil.example.org"})
        assert "access-control-allow-origin" not in denied.headers
        # A 401 still carries CORS headers, so a browser can read the error.
        unauthorized = c.get("/v1/models", headers={"Origin": "https://ui.example.org"})
        assert unauthorized.status_code == 401
        assert unauthorized.headers["access-control-allow-origin"] == "https://ui.example.org"
