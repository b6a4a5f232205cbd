"""The bytes of every streaming route: lines end with ``\\n`` and events with a blank line
(``\\n\\n``), never sse-starlette's default ``\\r\\n``, so a client that splits the body on
``"\\n\\n"`` (the web playground's fetch reader, many scripts) reads every event. Also: a
browser page on another origin may read ``X-Request-ID`` (CORS ``expose_headers``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_client, parse_sse, wait_ready
from tests.steps import Steps

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "Hello!"}]
# A small streaming request for each streaming route (those whose 200 is text/event-stream
# in the OpenAPI description); routes added by other doors are included when present.
STREAM_BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/stream": {"messages": MESSAGES, "max_tokens": 8},
    "/v1/chat/completions": {
        "messages": MESSAGES,
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "/v1/completions": {"prompt": "Once upon a time", "max_tokens": 8, "stream": True},
    "/v1/messages": {
        "model": "onnx-genai",
        "messages": MESSAGES,
        "max_tokens": 8,
        "stream": True,
    },
    "/v1/responses": {
        "model": "onnx-genai",
        "input": "Hello!",
        "max_output_tokens": 16,
        "stream": True,
    },
}
# Streaming routes whose request is not a JSON body for the demo model: their framing is
# checked where they are tested, with assert_lf_framing.
FRAMED_ELSEWHERE = {
    "/v1/audio/transcriptions": "tests/routes/audio/test_transcriptions.py (multipart, Whisper)",
}
ALLOWED_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


def streaming_routes(client: TestClient) -> list[str]:
    paths = client.get("/openapi.json").json()["paths"]
    return sorted(
        path
        for path, operations in paths.items()
        for operation in operations.values()
        if "text/event-stream" in operation.get("responses", {}).get("200", {}).get("content", {})
    )


def assert_lf_framing(raw: bytes) -> list[bytes]:
    """Every event is ``field: value\\n`` lines ended by one blank line; returns the events."""
    assert raw, "empty stream"
    assert b"\r" not in raw, f"a carriage return in the stream: {raw[:200]!r}"
    assert raw.endswith(b"\n\n"), f"the stream does not end with a blank line: {raw[-80:]!r}"
    events = raw[:-2].split(b"\n\n")
    for event in events:
        assert event, f"an empty event (three newlines in a row) in {raw[:200]!r}"
        for line in event.split(b"\n"):
            assert line.startswith(ALLOWED_FIELDS), f"not an SSE field line: {line[:80]!r}"
    return events


def split_like_a_browser(raw: bytes) -> list[str]:
    """What a page gets by splitting the text on blank lines and joining its data lines."""
    payloads = []
    for event in raw.decode().split("\n\n"):
        data = [line[5:].removeprefix(" ") for line in event.split("\n") if line[:5] == "data:"]
        if data:
            payloads.append("\n".join(data))
    return payloads


def test_every_streaming_route_has_a_request_here(client: TestClient) -> None:
    routes = streaming_routes(client)
    assert {"/v1/chat/stream", "/v1/chat/completions", "/v1/completions"} <= set(routes)
    missing = [path for path in routes if path not in STREAM_BODIES | FRAMED_ELSEWHERE]
    assert not missing, f"new streaming routes: add a request to STREAM_BODIES for {missing}"


@pytest.mark.parametrize("path", sorted(STREAM_BODIES))
def test_streams_use_lf_and_blank_line_separators(client: TestClient, path: str) -> None:
    if path not in streaming_routes(client):
        pytest.skip(f"{path} is not served by this build")
    with client.stream("POST", path, json=STREAM_BODIES[path]) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        raw = resp.read()
    events = assert_lf_framing(raw)
    payloads = split_like_a_browser(raw)
    assert len(payloads) == len(events) >= 2
    # The same events as a line-by-line SSE parser reads.
    assert payloads == parse_sse(iter(raw.decode().split("\n")))
    for payload in payloads:
        if payload != "[DONE]":
            assert isinstance(json.loads(payload), dict)


def test_pings_and_in_band_errors_use_the_same_framing(steps: Steps) -> None:
    # Pings every few ms and a deadline the generation cannot meet: the stream carries
    # keep-alive comments and ends with the in-band error event.
    steps.pace(0.01)  # 2,000 tokens take seconds on any machine, not 0.6 s as here
    with make_client(sse_ping=0.005, request_timeout=0.3) as c:
        wait_ready(c)
        body = {"messages": MESSAGES, "max_tokens": 2000, "min_tokens": 2000}
        with c.stream("POST", "/v1/chat/stream", json=body) as resp:
            assert resp.status_code == 200
            raw = resp.read()
    events = assert_lf_framing(raw)
    assert any(event.startswith(b": ping") for event in events)
    last = json.loads(split_like_a_browser(raw)[-1])
    assert last["error"]["code"] == "request_timeout", last


def test_cors_exposes_the_request_id() -> None:
    origin = "https://ui.example.org"
    with make_client(cors_origins=origin) as c:
        wait_ready(c)
        resp = c.get("/v1/models", headers={"Origin": origin})
        assert resp.headers["access-control-allow-origin"] == origin
        exposed = resp.headers["access-control-expose-headers"].lower().split(",")
        assert "x-request-id" in [h.strip() for h in exposed]
        assert resp.headers["x-request-id"]
        body = {**STREAM_BODIES["/v1/chat/completions"], "max_tokens": 2}
        with c.stream("POST", "/v1/chat/completions", json=body, headers={"Origin": origin}) as s:
            assert "x-request-id" in s.headers["access-control-expose-headers"].lower()
            s.read()
