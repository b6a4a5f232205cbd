"""The load client's probe: whether a server takes ``min_tokens`` is decided by the server's
answer, never by a failure that says nothing about the field."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from bench.harness.clients import make_client

pytestmark = pytest.mark.unit


def probe(answers: list[int]) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Probe a fake server that answers with ``answers``' statuses in turn."""
    bodies: list[dict[str, object]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        status = answers[len(bodies) - 1]
        if status != 200:
            return httpx.Response(status, json={"error": {"message": f"status {status}"}})
        usage = {"prompt_tokens": 3, "completion_tokens": 2}
        return httpx.Response(200, json={"choices": [{"finish_reason": "length"}], "usage": usage})

    async def go() -> dict[str, object]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
            return await make_client("http://fake", protocol="openai", model="m").probe(http)

    return asyncio.run(go()), bodies


def test_a_server_that_takes_min_tokens_gets_it() -> None:
    info, bodies = probe([200])
    assert info["min_tokens"] is True and info["probe_ok"] is True
    assert bodies[0]["min_tokens"] == 2


def test_a_refusal_turns_min_tokens_off() -> None:
    info, bodies = probe([400, 200])
    assert info["min_tokens"] is False and info["probe_ok"] is True
    assert "min_tokens" in bodies[0] and "min_tokens" not in bodies[1]


def test_a_busy_server_keeps_min_tokens() -> None:
    """A 408, 503 or 500 on a starved machine is asked again with the same body."""
    info, bodies = probe([408, 503, 200])
    assert info["min_tokens"] is True and info["probe_ok"] is True
    assert all(b["min_tokens"] == 2 for b in bodies)


def test_a_server_that_keeps_failing_is_reported() -> None:
    info, bodies = probe([500, 500, 500])
    assert info["probe_ok"] is False and "HTTP 500" in str(info["probe_error"])
    assert len(bodies) == 3
