"""/api/pull, /api/delete and /api/tags with the official ``ollama`` client, against the
local hub of tests/hub_server.py (``HF_ENDPOINT``): progress lines, then the pulled model
answers a chat; deleted, it leaves the listing and the cache. Admin actions: a user key gets
403. No real hub is reached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest
from fastapi.testclient import TestClient

from bench.harness.server import live_server
from tests.conftest import make_client, wait_ready
from tests.hub_server import LocalHub
from tests.test_pull import hub_env

REPO = "test-org/demo-llama"
ADMIN, USER = "admin-key", "user-key"
ASK = [{"role": "user", "content": "Hello!"}]


class AppTransport(httpx.BaseTransport):
    """The app in this process as the ``ollama`` client's transport, through ``http``."""

    def __init__(self, http: TestClient) -> None:
        self.http = http

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = self.http.request(
            request.method, request.url.path, content=request.read(), headers=request.headers
        )
        return httpx.Response(resp.status_code, headers=resp.headers, content=resp.content)


def ollama_client(http: TestClient, key: str) -> ollama.Client:
    """The ``ollama`` client over the app in this process."""
    return ollama.Client(
        host="http://testserver",
        transport=AppTransport(http),
        headers={"Authorization": f"Bearer {key}"},
    )


def check_progress(updates: list[Any]) -> None:
    statuses = [u.status for u in updates]
    assert statuses[0] == "pulling manifest"
    assert statuses[-3:] == ["verifying sha256 digest", "writing manifest", "success"]
    files: dict[str, list[Any]] = {}
    for u in updates[1:-3]:
        assert u.status == f"pulling {u.digest.partition(':')[2][:12]}"
        assert u.total is not None and u.completed is not None
        files.setdefault(u.digest, []).append(u.completed)
        assert 0 <= u.completed <= u.total
    assert len(files) >= 4  # config, tokenizer, model.onnx, its data, ...
    for digest, seen in files.items():
        assert seen == sorted(seen), f"{digest}: progress went back"
    last = {u.digest: u for u in updates[1:-3]}
    assert all(u.completed == u.total for u in last.values())


def listed(http: TestClient, key: str) -> list[str]:
    resp = http.get("/api/tags", headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 200, resp.text
    return [m["name"] for m in resp.json()["models"]]


@pytest.mark.model
def test_pull_chat_delete_with_the_ollama_client(hub: LocalHub, tmp_path: Path) -> None:
    with make_client(admin_api_key=ADMIN, api_key=USER) as http:
        wait_ready(http)
        client = ollama_client(http, ADMIN)
        check_progress(list(client.pull(REPO, stream=True)))
        assert f"{REPO}/model.onnx.data" in hub.downloads()
        assert REPO in listed(http, USER)  # listed before its first request loads it
        ps = http.get("/api/ps", headers={"Authorization": f"Bearer {USER}"}).json()
        assert REPO not in [m["name"] for m in ps["models"]]  # not in memory yet

        answer = client.chat(model=REPO, messages=ASK, options={"num_predict": 8})
        assert (answer.message.content or "").strip()

        hub.requests.clear()
        again = client.pull(REPO, stream=False)  # in the cache: nothing fetched again
        assert again.status == "success" and hub.downloads() == []

        client.delete(REPO)
        assert REPO not in listed(http, USER)
        assert not (tmp_path / "hf-cache" / "models--test-org--demo-llama").exists()
        with pytest.raises(ollama.ResponseError) as gone:
            client.chat(model=REPO, messages=ASK)
        assert gone.value.status_code == 404
        with pytest.raises(ollama.ResponseError) as twice:
            client.delete(REPO)
        assert twice.value.status_code == 404


@pytest.mark.model
def test_pull_and_delete_are_admin_actions(hub: LocalHub) -> None:
    with make_client(admin_api_key=ADMIN, api_key=USER) as http:
        wait_ready(http)
        user = ollama_client(http, USER)
        with pytest.raises(ollama.ResponseError) as refused:
            user.pull(REPO)
        assert refused.value.status_code == 403 and "admin key" in refused.value.error
        with pytest.raises(ollama.ResponseError) as refused:
            user.delete(REPO)
        assert refused.value.status_code == 403 and "admin key" in refused.value.error
        assert hub.requests == []
    with make_client() as http:  # no keys and GENAI_ADMIN unset: admin actions are off
        resp = http.post("/api/pull", json={"model": REPO})
        assert resp.status_code == 403 and "GENAI_ADMIN" in resp.json()["error"]


@pytest.mark.model
def test_pull_errors_before_and_during_the_stream(hub: LocalHub) -> None:
    with make_client(admin=True) as http:
        wait_ready(http)
        bad = http.post("/api/pull", json={"model": "not-a-repo"})
        assert bad.status_code == 400 and "ORG/REPO" in bad.json()["error"]
        assert http.post("/api/pull", json={}).status_code == 400
        lines = http.post("/api/pull", json={"model": "test-org/absent"}).text.splitlines()
        assert '"pulling manifest"' in lines[0]
        assert lines[-1].startswith('{"error":') and "test-org/absent" in lines[-1]
        whole = http.post("/api/pull", json={"model": "test-org/absent", "stream": False})
        assert whole.status_code == 502 and set(whole.json()) == {"error"}
        served = http.request("DELETE", "/api/delete", json={"model": "test-org/demo"})
        assert served.status_code == 404


@pytest.mark.live
def test_ollama_client_pulls_from_a_live_server(hub: LocalHub, tmp_path: Path) -> None:
    env = hub_env(hub, tmp_path / "live-cache", GENAI_ADMIN_API_KEY=ADMIN)
    with live_server(env=env) as server:
        client = ollama.Client(host=server.url, headers={"Authorization": f"Bearer {ADMIN}"})
        check_progress(list(client.pull(REPO, stream=True)))
        answer = client.chat(model=REPO, messages=ASK, options={"num_predict": 8})
        assert (answer.message.content or "").strip()
        assert REPO in [m.model for m in client.list().models]
        client.delete(REPO)
        assert REPO not in [m.model for m in client.list().models]
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
