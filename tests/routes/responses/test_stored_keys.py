"""Stored responses belong to the key that made them (GENAI_API_KEY="a,b"), on the real demo
model: every stored-Responses route, from the other key, answers exactly as for an id never
stored (GET, input_items and DELETE 404; previous_response_id 400 ``previous_response_not_found``,
as OpenAI answers an unknown one), whichever header carries the key; the owner's key still
reaches it all; the store keeps an HMAC of the key's hash, never the key; and one key storing
past its quota evicts only its own oldest, never another key's (issue 47's probe)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from routes.responses.sqlite_store import SqliteStore
from tests.conftest import assert_error, make_client, metric, wait_ready
from tests.routes.responses.helpers import text_of

pytestmark = pytest.mark.model

A, B = "key-a-7f3e9c", "key-b-51d20a"
AS_A = {"Authorization": f"Bearer {A}"}
AS_B_EITHER_WAY = ({"Authorization": f"Bearer {B}"}, {"x-api-key": B})
GREEDY: dict[str, Any] = {"temperature": 0, "max_output_tokens": 6, "min_tokens": 6}


@pytest.fixture(scope="module")
def keyed() -> Iterator[TestClient]:
    with make_client(api_key=f"{A},{B}") as c:
        wait_ready(c)
        yield c


def create(client: TestClient, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    resp = client.post("/v1/responses", json={**GREEDY, **body}, headers=headers)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def answers(client: TestClient, response_id: str, headers: dict[str, str]) -> list[Any]:
    """What each stored-Responses route answers for ``response_id``: (status, error body), with
    the id itself blanked out so that two ids' answers compare."""
    calls = [
        client.get(f"/v1/responses/{response_id}", headers=headers),
        client.get(f"/v1/responses/{response_id}/input_items", headers=headers),
        client.post(
            "/v1/responses",
            json={"input": "And then?", "previous_response_id": response_id, **GREEDY},
            headers=headers,
        ),
        client.delete(f"/v1/responses/{response_id}", headers=headers),
    ]
    return [(r.status_code, re.sub(r"resp_\w+", "ID", r.text)) for r in calls]


def test_another_keys_response_does_not_exist_for_it(keyed: TestClient) -> None:
    first = create(keyed, AS_A, input="What is the weather in Paris?")
    streamed = _streamed(keyed, AS_A)
    never = answers(keyed, "resp_" + "0" * 32, AS_A)
    assert [status for status, _ in never] == [404, 404, 400, 404]
    for response_id in (first["id"], streamed["id"]):
        for as_b in AS_B_EITHER_WAY:
            assert answers(keyed, response_id, as_b) == never
    # The other key's attempts (its DELETE included) changed nothing for the owner.
    assert keyed.get(f"/v1/responses/{first['id']}", headers=AS_A).json() == first
    items = keyed.get(f"/v1/responses/{first['id']}/input_items", headers=AS_A).json()
    assert [i["content"][0]["text"] for i in items["data"]] == ["What is the weather in Paris?"]
    chained = create(keyed, AS_A, input="And in Rome?", previous_response_id=first["id"])
    assert text_of(chained)
    assert keyed.delete(f"/v1/responses/{first['id']}", headers=AS_A).status_code == 200
    assert_error(keyed.get(f"/v1/responses/{first['id']}", headers=AS_A), 404)


def test_each_key_chains_on_its_own(keyed: TestClient) -> None:
    """Either key is a full user of its own responses; the second sees the first's as it
    sees an unknown id, and the first the second's."""
    mine = create(keyed, AS_A, input="Hello")
    theirs = create(keyed, AS_B_EITHER_WAY[1], input="Hello")
    chained = create(keyed, AS_B_EITHER_WAY[0], input="More", previous_response_id=theirs["id"])
    assert chained["previous_response_id"] == theirs["id"]
    err = assert_error(
        keyed.post(
            "/v1/responses",
            json={"input": "More", "previous_response_id": theirs["id"], **GREEDY},
            headers=AS_A,
        ),
        400,
        param="previous_response_id",
    )
    assert err["code"] == "previous_response_not_found"
    assert keyed.get(f"/v1/responses/{mine['id']}", headers=AS_A).status_code == 200


def test_the_store_keeps_a_hash_of_the_key_never_the_key(keyed: TestClient) -> None:
    made = create(keyed, AS_A, input="Hello")
    store = keyed.app.state.responses  # type: ignore[attr-defined]
    assert isinstance(store, SqliteStore)
    [(owner, body)] = store._db.execute(
        "SELECT owner, body FROM responses WHERE id = ?", (made["id"],)
    ).fetchall()
    # An HMAC of the key's hash, under the table's secret: neither the key nor its bare hash.
    bare = hashlib.sha256(A.encode()).hexdigest()
    assert owner.startswith("hmac-sha256:") and bare not in owner
    assert A not in owner and A not in body and bare not in body


def test_one_key_storing_many_keeps_anothers() -> None:
    """A stores one; B stores many more than its quota (here 3): A's is still there and
    chains; B keeps its newest 3; /metrics counts the keys, never names them."""
    as_b = AS_B_EITHER_WAY[0]
    one_token = {"max_output_tokens": 1}
    with make_client(api_key=f"{A},{B}", responses_key_max=3) as client:
        wait_ready(client)
        mine = create(client, AS_A, input="Hello", **one_token)
        theirs = [create(client, as_b, input="Hi", **one_token)["id"] for _ in range(8)]
        assert client.get(f"/v1/responses/{mine['id']}", headers=AS_A).json() == mine
        create(client, AS_A, input="More", previous_response_id=mine["id"], **one_token)
        kept = [client.get(f"/v1/responses/{i}", headers=as_b).status_code for i in theirs]
        assert kept == [404] * 5 + [200] * 3
        text = client.get("/metrics", headers=AS_A).text
    assert metric(text, "genai_responses_store_key_max_responses") == 3
    assert metric(text, 'genai_responses_store_evictions_total{reason="key_limit"}') == 5
    assert A not in text and B not in text and "sha256" not in text


def _streamed(client: TestClient, headers: dict[str, str]) -> dict[str, Any]:
    body = {"input": "Hi", "stream": True, **GREEDY}
    with client.stream("POST", "/v1/responses", json=body, headers=headers) as resp:
        assert resp.status_code == 200
        last = [line for line in resp.iter_lines() if line.startswith("data:")][-1]
    final: dict[str, Any] = json.loads(last.removeprefix("data:"))["response"]
    assert final["store"] is True
    return final
