"""Issue 47's probes, live, in the shape a multi-tenant deployment has: one ``main_genai.py``
process behind a real nginx (tests/proxy.py), its Responses store on a real PostgreSQL
(tests/postgres.py) whose URL carries a password, two user keys and an admin key, a model root,
the KV-event stream on its documented wildcard form, and a render route open to callers
without a key. Every probe goes through nginx, as an attacker's or a mistaken operator's would:

1. the KV-event socket listens on the server's own address, not on every interface;
2. no key and no password appear in the server's output or in ``/metrics``;
3. a hung, then a dead, database gives prompt 503s on the store's routes, does not slow a chat
   completion sent among them, and the store answers again within seconds (figures printed);
4. a user key gets 403 on /admin/*, sees and cancels only its own requests; every refused model
   path gets one answer; a 20,000-character model name is a short 400;
5. one key storing past its quota evicts none of another key's responses;
6. the open render route fetches no remote image for a caller without a key, and tells it
   nothing about the host;
7. a NUL in a response id, and a 5 M-character one, are 4xx with a short body; ``/health``
   shows no path without a key; another key's response answers as an unknown id.

Bad starts (a malformed or near-miss store URL, ``WORKERS`` with a KV endpoint, bad endpoints)
are process probes of their own, in tests/test_startup.py and tests/config/. Skipped, saying
why, without PostgreSQL or nginx."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.harness.server import ServerProcess, free_port
from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests import proxy
from tests.backends.engine.test_kv_events import listening_on
from tests.outage import CHAT, check_outage, hang_then_crash, timed
from tests.postgres import PostgresServer

pytestmark = pytest.mark.live

A, B, ADMIN = "tenant-key-a-6c1f", "tenant-key-b-93d0", "tenant-admin-4ab7"
PASSWORD = "S3cr3t-pw-71e2"  # in the store's URL: PostgreSQL trusts loopback, so it is unused
KEY_MAX = 3  # GENAI_RESPONSES_KEY_MAX
TIMEOUT = 2.0  # GENAI_RESPONSES_TIMEOUT
VISION = REPO_ROOT / "tests" / "hub_models" / "qwen2.5-vl"
GREEDY: dict[str, Any] = {"temperature": 0, "max_output_tokens": 2}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class _Images(BaseHTTPRequestHandler):
    """An image host on the allow-list: it counts what is fetched from it."""

    hits: list[str] = []

    def do_GET(self) -> None:
        _Images.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Deployment:
    client: httpx.Client  # through nginx
    server: ServerProcess
    db: PostgresServer
    kv_port: int
    root: Path  # GENAI_MODEL_ROOT
    images: str  # the allowed image host's URL

    def store(self, key: str, text: str = "Hello") -> str:
        resp = self.client.post("/v1/responses", json={"input": text, **GREEDY}, headers=auth(key))
        assert resp.status_code == 200, resp.text
        return str(resp.json()["id"])


@pytest.fixture(scope="module")
def deployment(
    postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    reason = proxy.missing()
    if reason is not None:
        pytest.skip(reason)
    url = postgres.new_database().replace("genai@", f"genai:{PASSWORD}@")
    folder = tmp_path_factory.mktemp("tenants")
    root = folder / "root"
    (root / "empty").mkdir(parents=True)
    models = folder / "models.toml"
    models.write_text(
        f'[[models]]\nname = "demo"\npath = "{DEMO_MODEL_DIR}"\n\n'
        f'[[models]]\nname = "vision"\npath = "{VISION}"\n'
    )
    images = ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    threading.Thread(target=images.serve_forever, daemon=True).start()
    kv_port = free_port()
    env = {
        "GENAI_MODELS_FILE": str(models),
        "GENAI_API_KEY": f"{A},{B}",
        "GENAI_ADMIN_API_KEY": ADMIN,
        "GENAI_RESPONSES_DB": url,
        "GENAI_RESPONSES_TIMEOUT": str(TIMEOUT),
        "GENAI_RESPONSES_KEY_MAX": str(KEY_MAX),
        "GENAI_MODEL_ROOT": str(root),
        "GENAI_KV_EVENTS_ENDPOINT": f"tcp://*:{kv_port}",
        "GENAI_RENDER_OPEN": "true",
        "GENAI_IMAGE_URL_HOSTS": "127.0.0.1",
        "GENAI_INTRA_OP_THREADS": "1",
    }
    server = ServerProcess("tenants", env, log_level="info")
    server.start()
    try:
        assert server.wait_ready(300), server.error
        with (
            proxy.round_robin([f"127.0.0.1:{server.port}"]) as front,
            httpx.Client(base_url=front, timeout=120) as client,
        ):
            yield Deployment(
                client, server, postgres, kv_port, root, f"http://127.0.0.1:{images.server_port}"
            )
    finally:
        server.stop()
        images.shutdown()


def error_of(resp: httpx.Response, status: int) -> dict[str, Any]:
    """The one error shape, with this status."""
    assert resp.status_code == status, resp.text[:500]
    err: dict[str, Any] = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return err


# ---- 1. KV events ----------------------------------------------------------------------------
def test_1_the_kv_wildcard_listens_on_the_servers_own_address(deployment: Deployment) -> None:
    assert listening_on(deployment.kv_port) == {"127.0.0.1"}  # HOST, not 0.0.0.0


# ---- 4. admin is its own role ------------------------------------------------------------------
def test_4_a_user_key_is_no_admin_and_sees_only_its_own_requests(deployment: Deployment) -> None:
    client, lines = deployment.client, list[str]()
    for key in (A, B):
        for method, path in (("GET", "/admin/requests"), ("POST", "/admin/models")):
            body = {"name": "x", "path": "empty"} if method == "POST" else None
            err = error_of(client.request(method, path, json=body, headers=auth(key)), 403)
            assert err["code"] == "admin_key_required"

    def long_stream() -> None:
        body = {
            "model": "demo", "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 1500, "min_tokens": 1500, "stream": True,
        }  # fmt: skip
        headers = {**auth(A), "X-Request-ID": "a-stream"}
        with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            lines.extend(r.iter_lines())

    thread = threading.Thread(target=long_stream)
    thread.start()
    deadline = time.monotonic() + 60
    while not client.get("/v1/requests", headers=auth(A)).json()["data"]:
        assert time.monotonic() < deadline, "A's stream never showed"
        time.sleep(0.02)
    assert client.get("/v1/requests", headers=auth(B)).json() == {"data": []}
    err = error_of(client.post("/v1/requests/a-stream/cancel", headers=auth(B)), 404)
    assert err["code"] == "request_not_found"
    everyone = client.get("/admin/requests", headers=auth(ADMIN)).json()["data"]
    assert [e["id"] for e in everyone] == ["a-stream"]
    done = client.post("/admin/requests/a-stream/cancel", headers=auth(ADMIN))
    assert done.json() == {"id": "a-stream", "cancelled": True}
    thread.join(30)
    assert not thread.is_alive()
    last = [line for line in lines if line.startswith("data:")][-1]
    assert json.loads(last[5:])["error"]["code"] == "request_cancelled"


def test_4_every_refused_model_path_answers_alike_and_names_are_capped(
    deployment: Deployment, tmp_path: Path
) -> None:
    (tmp_path / "there").mkdir()
    answers = set()
    for path in (str(tmp_path / "there"), str(tmp_path / "missing"), "/etc", "missing", "empty"):
        body = {"name": "x", "path": path}
        resp = deployment.client.post("/admin/models", json=body, headers=auth(ADMIN))
        answers.add(error_of(resp, 400)["message"])
    assert len(answers) == 1, answers
    long = {"name": "n" * 20_000, "path": "empty"}
    resp = deployment.client.post("/admin/models", json=long, headers=auth(ADMIN))
    assert error_of(resp, 400)["param"] == "name" and len(resp.content) < 1000
    names = [m["id"] for m in deployment.client.get("/v1/models", headers=auth(A)).json()["data"]]
    assert names == ["demo", "vision"]


# ---- 5. fair store bounds; the store's isolation ---------------------------------------------
def test_5_one_key_storing_many_evicts_none_of_anothers(deployment: Deployment) -> None:
    mine = deployment.store(A)
    theirs = [deployment.store(B, "Hi") for _ in range(KEY_MAX + 5)]
    client = deployment.client
    assert client.get(f"/v1/responses/{mine}", headers=auth(A)).status_code == 200
    kept = [client.get(f"/v1/responses/{i}", headers=auth(B)).status_code for i in theirs]
    assert kept == [404] * 5 + [200] * KEY_MAX


def test_7_another_keys_response_answers_as_an_unknown_id(deployment: Deployment) -> None:
    mine, client = deployment.store(A), deployment.client

    def answers(response_id: str) -> list[tuple[int, str]]:
        calls = [
            client.get(f"/v1/responses/{response_id}", headers=auth(B)),
            client.get(f"/v1/responses/{response_id}/input_items", headers=auth(B)),
            client.post(
                "/v1/responses",
                json={"input": "And?", "previous_response_id": response_id, **GREEDY},
                headers=auth(B),
            ),
            client.delete(f"/v1/responses/{response_id}", headers=auth(B)),
        ]
        return [(r.status_code, re.sub(r"resp_\w+", "ID", r.text)) for r in calls]

    assert answers(mine) == answers("resp_" + "0" * 32)
    assert client.get(f"/v1/responses/{mine}", headers=auth(A)).status_code == 200


# ---- 6. the open render route ----------------------------------------------------------------
def test_6_the_open_render_route_fetches_nothing_for_a_caller_without_a_key(
    deployment: Deployment,
) -> None:
    def image_chat(url: str) -> dict[str, Any]:
        part = {"type": "image_url", "image_url": {"url": url}}
        return {"model": "vision", "messages": [{"role": "user", "content": [part]}]}

    path, before = "/v1/chat/completions/render", len(_Images.hits)
    answers = set()
    for url in (f"{deployment.images}/missing", f"{deployment.images}/x.png", "http://a.b/c"):
        err = error_of(deployment.client.post(path, json=image_chat(url)), 400)
        assert "404" not in err["message"]
        answers.add(err["message"])
    assert len(answers) == 1 and len(_Images.hits) == before  # nothing was fetched
    chat = deployment.client.post("/v1/chat/completions", json=image_chat("data:,"))
    assert chat.status_code == 401  # the chat route itself stays keyed


# ---- 7. ids checked before the store; /health --------------------------------------------------
def test_7_a_nul_or_a_huge_id_is_a_short_4xx_never_a_500(deployment: Deployment) -> None:
    client = deployment.client
    # nginx refuses a NUL in a path itself (its own 400 page); the server behind it, reached
    # directly, answers as for any unknown id.
    assert client.get("/v1/responses/%00", headers=auth(A)).status_code == 400
    direct = httpx.get(f"{deployment.server.url}/v1/responses/%00", headers=auth(A))
    error_of(direct, 404)
    body = {"input": "Hi", "previous_response_id": "a\u0000b", **GREEDY}
    error_of(client.post("/v1/responses", json=body, headers=auth(A)), 400)
    huge = {"input": "Hi", "previous_response_id": "r" * 5_000_000, **GREEDY}
    resp = client.post("/v1/responses", json=huge, headers=auth(A))
    assert error_of(resp, 400)["param"] == "previous_response_id" and len(resp.content) < 2000


def test_7_health_shows_no_path_without_a_key(deployment: Deployment) -> None:
    for path in ("/health", "/healthz"):
        open_health = deployment.client.get(path)
        assert open_health.status_code == 200
        assert str(DEMO_MODEL_DIR) not in open_health.text and str(VISION) not in open_health.text


# ---- 3. a store outage stays in the store (leaves the database as it found it) ----------------
def test_3_a_hung_or_dead_database_is_a_prompt_503_and_slows_nothing_else(
    deployment: Deployment,
) -> None:
    client, db, headers = deployment.client, deployment.db, auth(A)
    response_id = deployment.store(A)
    client.post("/v1/chat/completions", json=CHAT, headers=headers)  # its grammar compiled
    calm, _ = timed(lambda: client.post("/v1/chat/completions", json=CHAT, headers=headers))
    check_outage(hang_then_crash(client, db, response_id, headers), calm, TIMEOUT)


# ---- 2. no secret in any output (last: after every probe above wrote its lines) ---------------
def test_2_no_key_and_no_password_in_the_output_or_the_metrics(deployment: Deployment) -> None:
    metrics = deployment.client.get("/metrics").text
    output = deployment.server.output()
    assert "request_finished" in output  # the log is there to read
    for secret in (A, B, ADMIN, PASSWORD):
        assert secret not in output and secret not in metrics, secret
