"""A PostgreSQL store that hangs (``kill -STOP``) or dies (``pg_ctl stop -m immediate``) mid-run,
on the real demo model: the store's routes answer 503 (``responses_store_unavailable``) within
GENAI_RESPONSES_TIMEOUT and a second, even 30 at once; a chat completion whose grammar check
runs off the event loop (``json_object``) is not slowed by them; and the store answers again
within seconds of the database's return. The figures are printed (``-s`` shows them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_client, wait_ready
from tests.postgres import PostgresServer

pytestmark = pytest.mark.live

TIMEOUT = 2.0  # GENAI_RESPONSES_TIMEOUT
AT_ONCE = 30
CHAT = {
    "messages": [{"role": "user", "content": "Give me a JSON object."}],
    "response_format": {"type": "json_object"},
    "max_tokens": 4,
    "temperature": 0,
}


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


def outage(client: TestClient, response_id: str) -> dict[str, float]:
    """While the database is out: 30 GETs at once, and a chat completion sent among them."""

    def get() -> tuple[float, Any]:
        return timed(lambda: client.get(f"/v1/responses/{response_id}"))

    figures: dict[str, float] = {}
    with ThreadPoolExecutor(AT_ONCE + 1) as pool:
        gets = [pool.submit(get) for _ in range(AT_ONCE)]
        time.sleep(0.2)  # they wait on the store now
        chat = pool.submit(timed, lambda: client.post("/v1/chat/completions", json=CHAT))
        answered = [g.result() for g in gets]
        figures["chat"], chat_resp = chat.result()
    assert chat_resp.status_code == 200, chat_resp.text
    for _, resp in answered:
        assert resp.status_code == 503, resp.text
        assert resp.json()["error"]["code"] == "responses_store_unavailable"
    figures["first_503"] = min(t for t, _ in answered)
    figures["slowest_503"] = max(t for t, _ in answered)
    return figures


def recovery(client: TestClient, response_id: str) -> float:
    """Seconds until a GET answers 200 again (the database just came back)."""
    back = time.perf_counter()
    while client.get(f"/v1/responses/{response_id}").status_code != 200:
        assert time.perf_counter() - back < 30, "the store did not come back"
        time.sleep(0.1)
    return time.perf_counter() - back


def test_a_hung_or_dead_database_is_a_prompt_503_and_slows_nothing_else(
    postgres: PostgresServer,
) -> None:
    url = postgres.new_database()
    with make_client(responses_db=url, responses_timeout=TIMEOUT) as client:
        wait_ready(client)
        made = client.post("/v1/responses", json={"input": "Hi", "max_output_tokens": 2})
        response_id = made.json()["id"]
        assert client.get(f"/v1/responses/{response_id}").status_code == 200
        client.post("/v1/chat/completions", json=CHAT)  # its grammar compiled once
        calm, _ = timed(lambda: client.post("/v1/chat/completions", json=CHAT))

        postgres.freeze()
        try:
            hung = outage(client, response_id)
        finally:
            postgres.thaw()
        hung["recovery"] = recovery(client, response_id)
        postgres.stop("immediate")
        try:
            down = outage(client, response_id)
        finally:
            postgres.start()
        down["recovery"] = recovery(client, response_id)

    print(f"\ncalm chat completion: {calm:.2f} s")
    for name, figures in (("hung", hung), ("down", down)):
        print(name, {k: round(v, 2) for k, v in figures.items()})
    for figures in (hung, down):
        assert figures["slowest_503"] < TIMEOUT + 1.5
        assert figures["chat"] < calm + 1.0
        assert figures["recovery"] < 5.0
