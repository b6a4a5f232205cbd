"""Operations through the real app: readiness, Prometheus metrics, request ids, admission
limits, admin cancel and profiling."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_client, metric, wait_ready
from tests.steps import Steps

pytestmark = pytest.mark.model

BODY = {"messages": [{"role": "user", "content": "hello"}], "temperature": 0, "max_tokens": 8}


def test_readyz(client: TestClient) -> None:
    resp = client.get("/readyz")
    assert resp.status_code == 200
    assert resp.json() == {"status": "ready", "scheduler": "batch"}  # auto, on the CPU


def test_request_id_is_echoed_or_made(client: TestClient) -> None:
    given = client.post("/v1/chat", json=BODY, headers={"X-Request-ID": "abc-123"})
    assert given.headers["x-request-id"] == "abc-123"
    made = client.get("/healthz").headers["x-request-id"]
    assert made.startswith("req-") and len(made) > 10
    bad = client.post("/v1/chat", json={}, headers={"X-Request-ID": "has spaces\n"})
    assert bad.status_code == 400 and bad.headers["x-request-id"].startswith("req-")


def test_metrics_count_requests_and_tokens(client: TestClient) -> None:
    before = client.get("/metrics").text
    r = client.post("/v1/chat", json=BODY).json()["metrics"]
    after = client.get("/metrics")
    assert after.headers["content-type"].startswith("text/plain")
    text = after.text
    assert (
        metric(text, "genai_requests_finished_total")
        == metric(before, "genai_requests_finished_total") + 1
    )
    assert (
        metric(text, "genai_generation_tokens_total")
        - metric(before, "genai_generation_tokens_total")
        == r["output_tokens"]
    )
    assert (
        metric(text, "genai_prompt_tokens_total") - metric(before, "genai_prompt_tokens_total")
        == r["input_tokens"]
    )
    for name in (
        "genai_time_to_first_token_seconds_count",
        "genai_e2e_request_latency_seconds_count",
        "genai_queue_time_seconds_count",
        "genai_inter_token_latency_seconds_count",
        "genai_requests_running",
        "genai_requests_waiting",
        "genai_requests_rejected_total",
        "genai_cached_prompt_tokens_total",
        "genai_prefix_store_capacity_bytes",  # the demo model runs on batch, with a store
    ):
        assert name in text, name
    assert metric(text, "genai_time_to_first_token_seconds_count") >= 1


def test_speculation_counts_in_usage_and_metrics(client: TestClient) -> None:
    """A request that asks for n-gram speculation and copies its prompt: its usage says what
    was drafted and taken, and /metrics counts the same (the acceptance rate too)."""
    before = client.get("/metrics").text
    body = {
        "messages": [
            {"role": "user", "content": "Repeat exactly: /data/notes-1/notes/test_moon/app.txt"}
        ],
        "temperature": 0,
        "max_tokens": 40,
        "speculative": {"method": "ngram", "num_speculative_tokens": 8},
    }
    usage = client.post("/v1/chat/completions", json=body).json()["usage"]
    details = usage["completion_tokens_details"]
    drafted, accepted = details["drafted_tokens"], details["accepted_tokens"]
    assert 0 < accepted <= drafted and accepted < usage["completion_tokens"]
    text = client.get("/metrics").text
    for name, count in (
        ("genai_speculative_draft_tokens_total", drafted),
        ("genai_speculative_accepted_tokens_total", accepted),
    ):
        assert metric(text, name) - metric(before, name) == count, name
    runs = metric(text, "genai_speculative_verify_runs_total")
    assert runs > metric(before, "genai_speculative_verify_runs_total")
    rate = metric(text, "genai_speculative_acceptance_rate")
    totals = [metric(text, f"genai_speculative_{k}_tokens_total") for k in ("accepted", "draft")]
    assert rate == pytest.approx(totals[0] / totals[1])
    body["speculative"] = {"num_speculative_tokens": 0}  # turned off: nothing drafted
    assert (
        "completion_tokens_details"
        not in client.post("/v1/chat/completions", json=body).json()["usage"]
    )


def test_full_server_answers_429_with_retry_after(steps: Steps) -> None:
    with make_client(max_concurrency=1, max_queue=0) as c:
        wait_ready(c)
        service = c.app.state.models  # type: ignore[attr-defined]
        hold = threading.Event()

        def long_request() -> None:
            body = {**BODY, "max_tokens": 1900, "min_tokens": 1900}
            with c.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
                for _ in r.iter_lines():
                    hold.set()

        t = threading.Thread(target=long_request)
        t.start()
        steps.until(hold.is_set)  # it streams, and steps no further than granted
        resp = c.post("/v1/chat", json=BODY)
        assert resp.status_code == 429
        assert resp.headers["retry-after"] == "1"
        assert resp.json()["error"]["code"] == "server_overloaded"
        assert metric(c.get("/metrics").text, "genai_requests_rejected_total") >= 1
        for r in service.stats().requests:
            service.cancel(r.id)
        steps.free()
        t.join(30)
        assert c.post("/v1/chat", json=BODY).status_code == 200


def test_admin_lists_and_cancels_a_running_request(steps: Steps) -> None:
    with make_client(admin=True) as c:
        wait_ready(c)
        result: dict[str, object] = {}

        def long_request() -> None:
            body = {**BODY, "max_tokens": 1900, "min_tokens": 1900, "stream": True}
            with c.stream(
                "POST", "/v1/chat/completions", json=body, headers={"X-Request-ID": "long-1"}
            ) as r:
                result["lines"] = list(r.iter_lines())

        t = threading.Thread(target=long_request)
        t.start()
        # Poll until it produced a token (however slow the machine); every listing on the way
        # must agree with itself and with the gauges: a request with a token is running.
        deadline = time.monotonic() + 60
        while True:
            listed = c.get("/admin/requests").json()["data"]
            for entry in listed:
                assert entry["state"] == "running" or entry["generated_tokens"] == 0, entry
            if listed and listed[0]["generated_tokens"] > 0:
                break
            assert time.monotonic() < deadline, listed
            steps.grant()  # one step at a time: it runs until it is cancelled
            time.sleep(0.01)  # a poll interval, not a guess at how long anything takes
        # (the stream's last event is checked below: an operator's cancel is no normal end)
        assert len(listed) == 1 and listed[0]["state"] == "running"
        assert listed[0]["id"].startswith("long-1")  # the request id names the generation
        gauges = c.get("/metrics").text
        assert metric(gauges, "genai_requests_running") == 1
        assert metric(gauges, "genai_requests_waiting") == 0
        rid = listed[0]["id"]
        assert c.post(f"/admin/requests/{rid}/cancel").json() == {"id": rid, "cancelled": True}
        steps.free()
        t.join(30)
        assert not t.is_alive()
        data = [line for line in result["lines"] if line.startswith("data:")]  # type: ignore[attr-defined]
        assert json.loads(data[-1][5:])["error"]["code"] == "request_cancelled"
        assert "data: [DONE]" not in data
        assert c.get("/admin/requests").json()["data"] == []
        missing = c.post("/admin/requests/nope/cancel")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "request_not_found"
        text = c.get("/metrics").text
        assert metric(text, "genai_requests_cancelled_total") == 1


def test_profiling_writes_capped_files(tmp_path: Path) -> None:
    with make_client(admin=True, profile_dir=tmp_path, profile_max_files=3) as c:
        wait_ready(c)
        on = c.post("/admin/profiling", json={"enabled": True, "steps": 1000}).json()
        assert on["enabled"] is True and on["directory"] == str(tmp_path)
        assert on["steps_left"] == 1000
        c.post("/v1/chat", json=BODY)  # 9 steps of one sequence: a profile file each
        # Pruned after every step: the cap, plus the last step's file if not yet pruned.
        assert len(list(tmp_path.glob("ort_*.json"))) <= 3 + 1
        off = c.post("/admin/profiling", json={"enabled": False}).json()
        assert off["enabled"] is False and off["steps_left"] == 0
        files = list(tmp_path.glob("ort_*.json"))
        assert 1 <= len(files) <= 3 and off["kept_files"] == len(files)
        before = len(files)
        c.post("/v1/chat", json=BODY)
        assert len(list(tmp_path.glob("ort_*.json"))) == before  # off means off


def test_a_profiling_window_ends_by_itself(tmp_path: Path) -> None:
    with make_client(admin=True, profile_dir=tmp_path, profile_max_files=50) as c:
        wait_ready(c)
        c.post("/admin/profiling", json={"enabled": True, "steps": 2})
        c.post("/v1/chat", json={**BODY, "max_tokens": 8})  # a prefill and 8 decode steps
        made = len(list(tmp_path.glob("ort_*.json")))
        assert 1 <= made <= 2
        c.post("/v1/chat", json=BODY)
        assert len(list(tmp_path.glob("ort_*.json"))) == made


@pytest.mark.parametrize(
    ("settings", "enabled"),
    [
        ({}, False),
        ({"admin_api_key": "k"}, True),
        ({"api_key": "u", "admin_api_key": "k"}, True),
        ({"admin": True}, True),
        ({"admin_api_key": "k", "admin": False}, False),
    ],
)
def test_admin_routes_are_off_unless_a_key_is_set_or_they_are_asked_for(settings, enabled) -> None:
    with make_client(**settings) as c:
        wait_ready(c)
        headers = {"Authorization": "Bearer k"}
        for method, path, body in (
            ("GET", "/admin/requests", None),
            ("POST", "/admin/requests/x/cancel", None),
            ("POST", "/admin/profiling", {"enabled": False}),
        ):
            resp = c.request(method, path, json=body, headers=headers)
            if enabled:
                assert resp.status_code in (200, 404), resp.text
            else:
                assert resp.status_code == 403
                assert resp.json()["error"]["code"] == "admin_disabled"
                assert "GENAI_ADMIN" in resp.json()["error"]["message"]


def test_admin_bodies_refuse_unknown_fields(tmp_path: Path) -> None:
    with make_client(admin=True, profile_dir=tmp_path) as c:
        wait_ready(c)
        resp = c.post("/admin/profiling", json={"enabled": True, "forever": True})
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "forever"
        resp = c.post("/admin/profiling", json={"enabled": True, "steps": 10**6})
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "steps"


def test_request_timeout_is_a_504_on_every_route() -> None:
    with make_client(request_timeout=0.05) as c:
        wait_ready(c)
        long = {"max_tokens": 1900, "min_tokens": 1900, "temperature": 0}
        for path, body in (
            ("/v1/chat/completions", {**long, "messages": BODY["messages"]}),
            ("/v1/completions", {**long, "prompt": "river"}),
            ("/v1/chat", {**long, "messages": BODY["messages"]}),
            ("/generate", {"prompt": "river", "max_new_tokens": 1900, "min_tokens": 1900}),
        ):
            resp = c.post(path, json=body)
            assert resp.status_code == 504, (path, resp.text)
            assert resp.json()["error"]["code"] == "request_timeout"


@pytest.mark.parametrize("path", ["/metrics", "/admin/requests", "/v1/requests"])
def test_ops_routes_need_the_api_key_when_set(path: str) -> None:
    with make_client(api_key="k1", admin_api_key="a1") as c:
        wait_ready(c)
        assert c.get(path).status_code == 401
        assert c.get(path, headers={"Authorization": "Bearer a1"}).status_code == 200
        assert c.get("/readyz").status_code == 200


def test_draining_refuses_new_work() -> None:
    with make_client() as c:
        wait_ready(c)
        c.app.state.models.draining = True  # type: ignore[attr-defined]
        assert c.get("/readyz").json()["status"] == "draining"
        assert c.get("/readyz").status_code == 503
        resp = c.post("/v1/chat", json=BODY)
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "shutting_down"
        assert c.get("/healthz").status_code == 200  # liveness unchanged


def test_sse_keepalive_pings_while_waiting_in_the_queue(steps: Steps) -> None:
    with make_client(max_concurrency=1, sse_ping=0.02) as c:
        wait_ready(c)
        service = c.app.state.models  # type: ignore[attr-defined]
        started = threading.Event()

        def long_request() -> None:
            body = {**BODY, "max_tokens": 1900, "min_tokens": 1900, "stream": True}
            with c.stream("POST", "/v1/chat/completions", json=body) as r:
                for _ in r.iter_lines():
                    started.set()

        steps.pace(0.05)  # the next request is read on the owner thread, between steps
        t = threading.Thread(target=long_request)
        t.start()
        assert started.wait(30)
        (long_id,) = [r.id for r in service.stats().requests]
        lines: list[str] = []
        with c.stream("POST", "/v1/chat/stream", json=BODY) as r:
            for line in r.iter_lines():
                lines.append(line)
                if line.startswith(":"):
                    service.cancel(long_id)  # a ping came while queued: now let it run
                    steps.free()
        t.join(30)
        first_data = next(i for i, line in enumerate(lines) if line.startswith("data:"))
        assert any(line.startswith(":") for line in lines[:first_data])
        data = [line for line in lines if line.startswith("data:")]
        assert json.loads(data[-1][5:])["done"] is True


def test_seed_stream_timeout_is_an_in_band_timeout_error() -> None:
    with make_client(request_timeout=0.001) as c:
        wait_ready(c)
        body = {**BODY, "max_tokens": 1900}  # 1900 tokens cannot finish within 1 ms
        with c.stream("POST", "/v1/chat/stream", json=body) as r:
            data = [line for line in r.iter_lines() if line.startswith("data:")]
        assert json.loads(data[-1][5:])["error"]["code"] == "request_timeout"
