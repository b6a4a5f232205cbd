"""A real server process: client disconnects stop generation; SIGTERM drains gracefully."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import httpx

from tests.live_server import ROOT, free_port, server_env

LONG = {
    "messages": [{"role": "user", "content": "go on"}],
    "max_tokens": 1900,
    "min_tokens": 1900,
    "temperature": 0,
    "stream": True,
}


def metric(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def start(**env: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "main_genai.py"],
        cwd=ROOT,
        text=True,
        env=server_env(PORT=str(port), **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise TimeoutError("server did not become ready")


def test_client_disconnect_stops_generation_and_server_keeps_serving() -> None:
    proc, base = start(GENAI_INTRA_OP_THREADS="1")
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
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
    finally:
        proc.terminate()
        proc.wait(30)


def test_sigterm_lets_streams_finish_refuses_new_work_and_exits_zero() -> None:
    proc, base = start(GENAI_SHUTDOWN_TIMEOUT="60", GENAI_INTRA_OP_THREADS="1")
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
    try:
        first_token.wait()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        refused = httpx.post(
            f"{base}/v1/chat", json={"messages": [{"role": "user", "content": "hi"}]}, timeout=10
        )
        ready = httpx.get(f"{base}/readyz", timeout=10)
        for t in threads:
            t.join(60)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = proc.stdout.read() if proc.stdout else ""
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "shutting_down"
    assert ready.status_code == 503 and ready.json()["status"] == "draining"
    for lines in events:
        assert lines[-1] == "data: [DONE]", lines[-3:]
        assert '"finish_reason":"length"' in "".join(lines).replace(" ", "")
    assert code == 0, output
