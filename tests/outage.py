"""A store outage as a client sees it: many GETs of a stored response at once while the database
is hung (``kill -STOP``), then down (``pg_ctl stop -m immediate``), a chat completion sent among
them (its ``json_object`` grammar check runs off the event loop, beside the store's calls), and
the time until the store answers again; the figures printed (``-s``) and checked against the
documented bounds. Used by tests/routes/responses/test_store_outage.py (in-process) and
tests/test_tenants_live.py (behind nginx)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.postgres import PostgresServer

# An httpx.Client or a Starlette TestClient: the latter derives from its own copy of httpx, so
# no one annotation takes both.
Client = Any

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


def outage(
    client: Client, response_id: str, headers: dict[str, str] | None = None
) -> dict[str, float]:
    """While the database is out: 30 GETs at once, and a chat completion sent among them.
    Each GET must be a 503 ``responses_store_unavailable``, the chat a 200."""

    def get() -> tuple[float, Any]:
        return timed(lambda: client.get(f"/v1/responses/{response_id}", headers=headers))

    figures: dict[str, float] = {}
    with ThreadPoolExecutor(AT_ONCE + 1) as pool:
        gets = [pool.submit(get) for _ in range(AT_ONCE)]
        time.sleep(0.2)  # they wait on the store now
        chat = pool.submit(
            timed, lambda: client.post("/v1/chat/completions", json=CHAT, headers=headers)
        )
        answered = [g.result() for g in gets]
        figures["chat"], chat_resp = chat.result()
    assert chat_resp.status_code == 200, chat_resp.text
    for _, resp in answered:
        assert resp.status_code == 503, resp.text
        assert resp.json()["error"]["code"] == "responses_store_unavailable"
    figures["first_503"] = min(t for t, _ in answered)
    figures["slowest_503"] = max(t for t, _ in answered)
    return figures


def recovery(client: Client, response_id: str, headers: dict[str, str] | None = None) -> float:
    """Seconds until a GET answers 200 again (the database just came back)."""
    back = time.perf_counter()
    while (resp := client.get(f"/v1/responses/{response_id}", headers=headers)).status_code != 200:
        assert time.perf_counter() - back < 30, f"the store did not come back: {resp.text[:300]}"
        time.sleep(0.1)
    return time.perf_counter() - back


def hang_then_crash(
    client: Client, db: PostgresServer, response_id: str, headers: dict[str, str] | None = None
) -> dict[str, dict[str, float]]:
    """The outage's figures with the database hung, then down, each with its recovery."""
    db.freeze()
    try:
        hung = outage(client, response_id, headers)
    finally:
        db.thaw()
    hung["recovery"] = recovery(client, response_id, headers)
    # The throwaway cluster commits asynchronously (tests/postgres.py), and its WAL writer was
    # frozen with it: a crash now could lose the stored row, which is not what is measured.
    db.sql(db.url(), "CHECKPOINT")
    db.stop("immediate")
    try:
        down = outage(client, response_id, headers)
    finally:
        db.start()
    down["recovery"] = recovery(client, response_id, headers)
    return {"hung": hung, "down": down}


def check_outage(figures: dict[str, dict[str, float]], calm: float, timeout: float) -> None:
    """Print the figures; each 503 within the store's timeout and a second and a half, the chat
    within a second of its calm time, the store back within 5 s."""
    print(f"\ncalm chat completion: {calm:.2f} s")
    for name, each in figures.items():
        print(name, {k: round(v, 2) for k, v in each.items()})
    for each in figures.values():
        assert each["slowest_503"] < timeout + 1.5
        assert each["chat"] < calm + 1.0
        assert each["recovery"] < 5.0
