"""A real server process: client disconnects stop generation; SIGTERM drains gracefully."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from bench.harness.server import ServerProcess, live_server
from tests.conftest import metric

pytestmark = pytest.mark.live

LONG = {
    "messages": [{"role": "user", "content": "go on"}],
    "max_tokens": 1900,
    "min_tokens": 1900,
    "temperature": 0,
    "stream": True,
}


def test_client_disconnect_stops_generation_and_server_keeps_serving() -> None:
    with live_server(GENAI_INTRA_OP_THREADS="1", GENAI_ADMIN="true") as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            with client.stream("POST", "/v1/chat/completions", json=LONG) as resp:
                for n, _ in enumerate(resp.iter_lines()):
                    if n > 10:
                        break  # leave mid-stream: the connection closes here
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                text = client.get("/metrics").text
                if metric(text, "genai_requests_cancelled_total") >= 1:
                    break
                time.sleep(0.05)
            assert metric(text, "genai_requests_cancelled_total") == 1
            assert metric(text, "genai_generation_tokens_total") < 1900
            assert client.get("/admin/requests").json()["data"] == []
            assert metric(text, "genai_requests_running") == 0
            ok = client.post(
                "/v1/chat", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            )
            assert ok.status_code == 200


def test_sigterm_lets_streams_finish_refuses_new_work_and_exits_zero() -> None:
    with live_server(
        GENAI_SHUTDOWN_TIMEOUT="60", GENAI_INTRA_OP_THREADS="1", log_level="info"
    ) as server:
        refused, ready, code, output, events = drain_under_load(server)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "shutting_down"
    assert ready.status_code == 503 and ready.json()["status"] == "draining"
    for lines in events:
        assert lines[-1] == "data: [DONE]", lines[-3:]
        assert '"finish_reason":"length"' in "".join(lines).replace(" ", "")
    assert code == 0, output


def drain_under_load(
    server: ServerProcess,
) -> tuple[httpx.Response, httpx.Response, int, str, list[list[str]]]:
    """Three long streams; SIGTERM once each has its first chunk; what the server did then."""
    base = server.url
    events: list[list[str]] = [[] for _ in range(3)]
    first_token = threading.Barrier(4, timeout=30)

    def stream(i: int) -> None:
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=LONG, timeout=60) as r:
            for n, line in enumerate(r.iter_lines()):
                if n == 0:
                    first_token.wait()
                if line.startswith("data:"):
                    events[i].append(line)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    first_token.wait()
    server.terminate()
    # Wait for the signal to be handled (however loaded the machine), not a fixed while.
    deadline = time.monotonic() + 30
    while (ready := httpx.get(f"{base}/readyz", timeout=10)).json()["status"] != "draining":
        assert time.monotonic() < deadline, ready.text
    refused = httpx.post(
        f"{base}/v1/chat", json={"messages": [{"role": "user", "content": "hi"}]}, timeout=10
    )
    for t in threads:
        t.join(60)
    return refused, ready, server.wait(60), server.output(), events


def test_a_stream_cut_by_the_shutdown_timeout_ends_with_an_error_not_done() -> None:
    with live_server(GENAI_SHUTDOWN_TIMEOUT="0", GENAI_INTRA_OP_THREADS="1") as server:
        lines: list[str] = []
        first = threading.Event()

        def stream() -> None:
            with httpx.stream(
                "POST", f"{server.url}/v1/chat/completions", json=LONG, timeout=60
            ) as r:
                for line in r.iter_lines():
                    first.set()
                    if line.startswith("data:"):
                        lines.append(line)

        t = threading.Thread(target=stream)
        t.start()
        assert first.wait(30)
        server.terminate()
        t.join(60)
        assert server.wait(60) == 0
    last = json.loads(lines[-1][5:])
    assert last["error"]["code"] == "shutting_down", lines[-3:]
    assert "data: [DONE]" not in lines
    assert not any('"finish_reason":"stop"' in line.replace(" ", "") for line in lines)
