"""Sessions on different doors with one system prompt: each door reports the prefix another
session already read (copied from its KV row, not prefilled) as cached prompt tokens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_client, wait_ready

pytestmark = pytest.mark.model

SYSTEM = "You are a careful assistant for a river survey team. " * 10


@pytest.fixture(scope="module")
def fresh() -> Iterator[TestClient]:
    with make_client(scheduler="batch") as c:
        wait_ready(c)
        yield c


def test_every_door_reports_a_shared_system_prompt_as_cached(fresh: TestClient) -> None:
    def chat(ask: str) -> dict:
        body = {
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}],
            "max_tokens": 2,
            "temperature": 0,
        }
        resp = fresh.post("/v1/chat/completions", json=body)
        assert resp.status_code == 200, resp.text
        return resp.json()["usage"]

    first = chat("Where is the river?")
    assert (first.get("prompt_tokens_details") or {}).get("cached_tokens", 0) == 0
    assert chat("How deep is it?")["prompt_tokens_details"]["cached_tokens"] >= 32

    messages = fresh.post(
        "/v1/messages",
        json={
            "model": "onnx-genai",
            "system": SYSTEM,
            "messages": [{"role": "user", "content": "How wide is it?"}],
            "max_tokens": 2,
            "temperature": 0,
        },
    )
    assert messages.status_code == 200, messages.text
    assert messages.json()["usage"]["cache_read_input_tokens"] >= 32

    responses = fresh.post(
        "/v1/responses",
        json={"instructions": SYSTEM, "input": "How cold is it?", "max_output_tokens": 16},
    )
    assert responses.status_code == 200, responses.text
    assert responses.json()["usage"]["input_tokens_details"]["cached_tokens"] >= 32
