"""Two replicas on one machine: two ``main_genai.py`` processes on loopback, sharing one real
PostgreSQL store (tests/postgres.py) behind a real round-robin proxy (nginx: tests/proxy.py),
both with the keys "a,b". Through the proxy:

- a Responses chain of four turns alternates replicas, and each turn's prompt starts with the
  tokens the turn before it read and wrote, as the store keeps them, though the replica that
  continues it never held that turn's KV cache;
- GET, input_items and DELETE work from either replica;
- the second key sees nothing of the first's, on either replica;
- killing one replica mid-stream loses no stored response that had completed (run last: it
  leaves one replica).

The answers are printed (``pytest -s``) as the proof's record. Skipped, saying why, without
PostgreSQL or nginx."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from bench.harness.server import ServerProcess
from tests import proxy
from tests.conftest import metric
from tests.postgres import PostgresServer

pytestmark = pytest.mark.live

A, B = "replica-key-a", "replica-key-b"
AS_A, AS_B = {"Authorization": f"Bearer {A}"}, {"Authorization": f"Bearer {B}"}
GREEDY: dict[str, Any] = {"temperature": 0, "max_output_tokens": 8, "min_tokens": 8}
TURNS = ["What is the weather in Paris?", "And in Rome?", "Which one is warmer?", "Why?"]


@dataclass
class Cluster:
    proxy: str
    replicas: list[ServerProcess]
    db: PostgresServer
    url: str  # the shared database

    def replica(self, resp: httpx.Response) -> int:
        """Which replica answered (the last address nginx tried)."""
        answered = resp.headers["x-upstream"].split(",")[-1].strip()
        ports = [str(r.port) for r in self.replicas]
        return ports.index(answered.rsplit(":", 1)[1])

    def create(self, text: str) -> dict[str, Any]:
        """A stored response of key a's, made through the proxy."""
        resp = httpx.post(
            f"{self.proxy}/v1/responses", json={"input": text, **GREEDY}, headers=AS_A, timeout=120
        )
        assert resp.status_code == 200, resp.text
        made: dict[str, Any] = resp.json()
        return made

    def transcript(self, response_id: str) -> list[int]:
        """The tokens the store keeps for a response: what its model read and wrote."""
        [(body,)] = self.db.sql(
            self.url, "SELECT body FROM genai_responses WHERE id = %s", response_id
        )
        return [int(t) for t in json.loads(body)["transcript"]["ids"]]


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer) -> Iterator[Cluster]:
    reason = proxy.missing()
    if reason is not None:
        pytest.skip(reason)
    url = postgres.new_database()
    env = {"GENAI_API_KEY": f"{A},{B}", "GENAI_RESPONSES_DB": url, "GENAI_INTRA_OP_THREADS": "1"}
    replicas = [ServerProcess(f"replica-{i}", env) for i in range(2)]
    for r in replicas:  # at once: both migrate the new database, one after the other
        r.start()
    try:
        for r in replicas:
            assert r.wait_ready(180), r.error
        with proxy.round_robin([f"127.0.0.1:{r.port}" for r in replicas]) as proxied:
            yield Cluster(proxied, replicas, postgres, url)
    finally:
        for r in replicas:
            r.stop()


def test_a_chain_alternates_replicas_and_continues_the_stored_tokens(cluster: Cluster) -> None:
    rows, previous = [], None
    with httpx.Client(base_url=cluster.proxy, headers=AS_A, timeout=120) as http:
        for n, text in enumerate(TURNS):
            link: dict[str, Any] = {"previous_response_id": previous["id"]} if previous else {}
            resp = http.post("/v1/responses", json={"input": text, **GREEDY, **link})
            assert resp.status_code == 200, resp.text
            made = resp.json()
            tokens = cluster.transcript(made["id"])
            usage = made["usage"]
            continued = "-"
            if previous is not None:
                earlier = cluster.transcript(previous["id"])
                assert tokens[: len(earlier)] == earlier, f"turn {n + 1} re-tokenized turn {n}"
                assert usage["input_tokens"] > len(earlier)
                continued = f"its first {len(earlier)} = turn {n}'s stored tokens"
            rows.append((n + 1, cluster.replica(resp), usage, continued))
            previous = made
    print("\nturn  replica  input_tokens  cached_tokens  prompt starts with")
    for turn, replica, usage, continued in rows:
        cached = usage["input_tokens_details"]["cached_tokens"]
        print(f"{turn:>4}  {replica:>7}  {usage['input_tokens']:>12}  {cached:>13}  {continued}")
    served = [replica for _, replica, _, _ in rows]
    assert served in ([0, 1, 0, 1], [1, 0, 1, 0]), f"not alternating: {served}"
    # Turn 2 ran where turn 1's KV cache never was: all it had were the stored tokens.
    second = rows[1][2]
    assert second["input_tokens_details"]["cached_tokens"] < rows[0][2]["input_tokens"]


def test_get_input_items_and_delete_work_from_either_replica(cluster: Cluster) -> None:
    made = cluster.create(TURNS[0])
    path = f"/v1/responses/{made['id']}"
    direct = [r.url for r in cluster.replicas]
    for url in direct:
        assert httpx.get(url + path, headers=AS_A).json() == made
        items = httpx.get(url + path + "/input_items", headers=AS_A).json()
        assert [i["content"][0]["text"] for i in items["data"]] == [TURNS[0]]
    through = [httpx.get(cluster.proxy + path, headers=AS_A) for _ in range(2)]
    assert {cluster.replica(r) for r in through} == {0, 1}
    assert all(r.json() == made for r in through)
    gone = httpx.delete(cluster.proxy + path, headers=AS_A)
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    deleter = cluster.replica(gone)
    print(f"\nstored through the proxy; read from replicas 0 and 1; deleted on replica {deleter}")
    for url in direct:
        assert httpx.get(url + path, headers=AS_A).status_code == 404
        assert httpx.get(url + path + "/input_items", headers=AS_A).status_code == 404
    assert httpx.delete(direct[1 - deleter] + path, headers=AS_A).status_code == 404


def test_the_second_key_sees_nothing_of_the_firsts(cluster: Cluster) -> None:
    made = cluster.create(TURNS[0])
    never = "resp_" + "0" * 32
    for url in [r.url for r in cluster.replicas] + [cluster.proxy]:
        got = answers(url, made["id"], AS_B)
        assert got == answers(url, never, AS_B)
        assert [status for status, _ in got] == [404, 404, 400, 404]
    mine = httpx.get(f"{cluster.proxy}/v1/responses/{made['id']}", headers=AS_A)
    assert mine.json() == made, "the second key's DELETEs changed nothing"
    print("\nkey b, on replica 0, replica 1 and the proxy: 404 GET, 404 input_items, "
          "400 previous_response_not_found, 404 DELETE (as for an id never stored)")  # fmt: skip


def answers(url: str, response_id: str, headers: dict[str, str]) -> list[Any]:
    """Each stored-Responses route's status for ``response_id``, and its error with the id
    blanked (so that two ids' answers compare): GET, input_items, a chain on it, DELETE."""
    path = f"{url}/v1/responses/{response_id}"
    calls = [
        httpx.get(path, headers=headers),
        httpx.get(path + "/input_items", headers=headers),
        httpx.post(
            f"{url}/v1/responses",
            json={"input": "x", "previous_response_id": response_id, **GREEDY},
            headers=headers,
            timeout=120,
        ),
        httpx.delete(path, headers=headers),
    ]
    return [(r.status_code, re.sub(r"resp_\w+", "ID", r.text)) for r in calls]


def test_killing_a_replica_mid_stream_loses_no_completed_response(cluster: Cluster) -> None:
    with httpx.Client(base_url=cluster.proxy, headers=AS_A, timeout=120) as http:
        completed = []
        for text in TURNS:  # two on each replica
            resp = http.post("/v1/responses", json={"input": text, **GREEDY})
            assert resp.status_code == 200, resp.text
            completed.append((resp.json(), cluster.replica(resp)))
        long = {"input": "go on", "max_output_tokens": 1900, "min_tokens": 1900, "stream": True}
        events: list[str] = []
        cut = None  # the id of the response being streamed
        with http.stream("POST", "/v1/responses", json={**long, "temperature": 0}) as stream:
            victim = cluster.replica(stream)
            lines = stream.iter_lines()
            try:
                for line in lines:
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        events.append(event["type"])
                        cut = cut or event.get("response", {}).get("id")
                    if events.count("response.output_text.delta") == 10:
                        cluster.replicas[victim].proc.kill()  # type: ignore[union-attr]
                        cluster.replicas[victim].wait(30)
            except httpx.HTTPError as exc:  # the connection died with the replica
                events.append(type(exc).__name__)
        assert "response.completed" not in events, "the stream was cut before it ended"
        assert cut is not None and events[0] == "response.created"
        survivor = 1 - victim
        kept = [http.get(f"/v1/responses/{made['id']}") for made, _ in completed]
        assert [r.status_code for r in kept] == [200] * len(completed)
        assert [r.json() for r in kept] == [made for made, _ in completed]
        assert {cluster.replica(r) for r in kept} == {survivor}
        assert http.get(f"/v1/responses/{cut}").status_code == 404, "it never completed"
        # A chain on a response the dead replica made goes on, on the survivor.
        on_victim = next(made for made, replica in completed if replica == victim)
        more = http.post(
            "/v1/responses",
            json={"input": "And then?", "previous_response_id": on_victim["id"], **GREEDY},
        )
        assert more.status_code == 200, more.text
        earlier = cluster.transcript(on_victim["id"])
        assert cluster.transcript(more.json()["id"])[: len(earlier)] == earlier
        # The survivor's gauge comes to the shared table's count (read once a second).
        [(rows,)] = cluster.db.sql(cluster.url, "SELECT COUNT(*) FROM genai_responses")
        deadline = time.monotonic() + 10
        gauge = "genai_responses_store_responses"
        while (held := metric(http.get("/metrics").text, gauge)) != rows:
            assert time.monotonic() < deadline, f"the gauge says {held}, the table holds {rows}"
            time.sleep(0.2)
    print(
        f"\nreplica {victim} killed (SIGKILL) after {events.count('response.output_text.delta')} "
        f"deltas of a stream (it ended with {events[-1]}, no response.completed, and it was "
        "not stored); "
        f"{len(completed)} completed responses, {sum(r == victim for _, r in completed)} made "
        f"on the killed replica: all {len(kept)} read back through the proxy from replica "
        f"{survivor}; a chain on one of the dead replica's continued its stored tokens; "
        f"the survivor's {gauge} gauge came to {held:.0f}, the table's rows"
    )
