"""A PostgreSQL store that hangs (``kill -STOP``) or dies (``pg_ctl stop -m immediate``) mid-run,
on the real demo model: the store's routes answer 503 (``responses_store_unavailable``) within
GENAI_RESPONSES_TIMEOUT and a second, even 30 at once; a chat completion whose grammar check
runs off the event loop (``json_object``) is not slowed by them; and the store answers again
within seconds of the database's return. The figures are printed (``-s`` shows them)."""

from __future__ import annotations

import pytest

from tests.conftest import make_client, wait_ready
from tests.outage import CHAT, check_outage, hang_then_crash, timed
from tests.postgres import PostgresServer

pytestmark = pytest.mark.live

TIMEOUT = 2.0  # GENAI_RESPONSES_TIMEOUT


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

        figures = hang_then_crash(client, postgres, response_id)
    check_outage(figures, calm, TIMEOUT)
