"""Many tenants, one server: two user keys and an admin key through the real app. A user key
gets 403 on /admin/*, and lists and cancels only its own requests (/v1/requests); an admin key
sees and cancels everyone's. /admin/models loads only from under GENAI_MODEL_ROOT and answers
every refused path alike; it caps the models served and a name's length. /health shows no path
to a caller without a key, and a render route opened to such callers takes inline images only.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.conftest import assert_error, make_client, wait_ready
from tests.steps import Steps, installed

pytestmark = pytest.mark.model

A, B, ADMIN = "key-a", "key-b", "key-admin"
BODY = {"messages": [{"role": "user", "content": "hello"}], "temperature": 0, "max_tokens": 8}
VISION = REPO_ROOT / "tests" / "hub_models" / "qwen2.5-vl"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def steps() -> Iterator[Steps]:
    """The module's model steps freely, but for a test that holds it (tests/steps.py)."""
    with installed(held=False) as free:
        yield free


@pytest.fixture(autouse=True)
def _free_after(steps: Steps) -> Iterator[None]:
    """A test that held the steps, passed or failed, leaves them free for the next."""
    yield
    steps.free()


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory, steps: Steps) -> Iterator[TestClient]:
    root = tmp_path_factory.mktemp("root")
    (root / "empty").mkdir()
    (root / "outside").symlink_to(tmp_path_factory.mktemp("elsewhere"))
    shutil.copytree(DEMO_MODEL_DIR, root / "demo")  # links are followed: one out is refused
    settings = {"api_key": f"{A},{B}", "admin_api_key": ADMIN, "model_root": root}
    with make_client(**settings, max_models=1) as client:
        wait_ready(client)
        yield client


def test_a_user_key_gets_403_on_every_admin_route(tenants: TestClient) -> None:
    for method, path, body in (
        ("GET", "/admin/requests", None),
        ("POST", "/admin/requests/x/cancel", None),
        ("POST", "/admin/profiling", {"enabled": False}),
        ("POST", "/admin/models", {"name": "x", "path": "demo"}),
        ("DELETE", "/admin/models/onnx-genai", None),
    ):
        err = assert_error(tenants.request(method, path, json=body, headers=auth(A)), 403)
        assert err["code"] == "admin_key_required", path
    assert tenants.get("/admin/requests", headers=auth(ADMIN)).status_code == 200
    # An admin key does all a user key does.
    assert tenants.post("/v1/chat/completions", json=BODY, headers=auth(ADMIN)).status_code == 200


def test_user_keys_without_an_admin_key_reach_no_admin_route() -> None:
    with make_client(api_key=A) as client:
        wait_ready(client)
        err = assert_error(client.get("/admin/requests", headers=auth(A)), 403)
        assert err["code"] == "admin_key_required"
        assert client.get("/v1/requests", headers=auth(A)).json() == {"data": []}


def test_a_key_sees_and_cancels_its_own_requests_alone(tenants: TestClient, steps: Steps) -> None:
    lines: list[str] = []
    steps.hold()  # it runs until A cancels it

    def long_request() -> None:
        body = {**BODY, "max_tokens": 1900, "min_tokens": 1900, "stream": True}
        headers = {**auth(A), "X-Request-ID": "a-long"}
        with tenants.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            lines.extend(r.iter_lines())

    thread = threading.Thread(target=long_request)
    thread.start()
    deadline = time.monotonic() + 60
    while not (mine := tenants.get("/v1/requests", headers=auth(A)).json()["data"]):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    [entry] = mine
    assert entry["id"] == "a-long"
    # B: nothing listed, and A's id is not found (as one never seen), on both kinds of route.
    assert tenants.get("/v1/requests", headers=auth(B)).json() == {"data": []}
    err = assert_error(tenants.post("/v1/requests/a-long/cancel", headers=auth(B)), 404)
    assert err["code"] == "request_not_found"
    assert_error(tenants.get("/admin/requests", headers=auth(B)), 403)
    assert_error(tenants.post("/admin/requests/a-long/cancel", headers=auth(B)), 403)
    # The admin sees everyone's (its own listing on /v1/requests is its own: empty).
    everyone = tenants.get("/admin/requests", headers=auth(ADMIN)).json()["data"]
    assert [e["id"] for e in everyone] == ["a-long"] and "owner" not in everyone[0]
    assert tenants.get("/v1/requests", headers=auth(ADMIN)).json() == {"data": []}
    # A cancels its own.
    done = tenants.post("/v1/requests/a-long/cancel", headers=auth(A))
    assert done.json() == {"id": "a-long", "cancelled": True}
    steps.free()
    thread.join(30)
    assert not thread.is_alive()
    data = [line for line in lines if line.startswith("data:")]
    assert json.loads(data[-1][5:])["error"]["code"] == "request_cancelled"


def test_every_refused_model_path_gets_one_answer(tenants: TestClient, tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    paths = [
        str(tmp_path / "folder"),  # outside the root, there
        str(tmp_path / "missing"),  # outside the root, missing
        "/etc",  # outside, there, readable
        "missing",  # inside, missing
        "empty",  # inside, no model folder
        "outside",  # inside, a link to a folder outside
        "../" + tmp_path.name,  # climbing out
        "demo/genai_config.json",  # a file, not a folder
    ]
    answers = set()
    for path in paths:
        resp = tenants.post("/admin/models", json={"name": "x", "path": path}, headers=auth(ADMIN))
        err = assert_error(resp, 400, "path")
        answers.add((err["message"], err["code"], err["type"]))
    assert len(answers) == 1, answers
    adapters = {"name": "x", "path": "demo", "adapters": {"y": "/etc/hostname"}}
    err = assert_error(tenants.post("/admin/models", json=adapters, headers=auth(ADMIN)), 400)
    assert (err["message"], err["code"], err["type"]) in answers


def test_loaded_models_and_names_are_capped(tenants: TestClient) -> None:
    long = {"name": "n" * 20_000, "path": "demo"}
    err = assert_error(tenants.post("/admin/models", json=long, headers=auth(ADMIN)), 400, "name")
    assert "20000" not in err["message"] and len(err["message"]) < 500
    long_adapter = {"name": "x", "path": "demo", "adapters": {"a" * 129: "demo/x"}}
    assert_error(tenants.post("/admin/models", json=long_adapter, headers=auth(ADMIN)), 400)
    # GENAI_MAX_MODELS=1, and one is served: a good path is refused before anything loads.
    err = assert_error(
        tenants.post("/admin/models", json={"name": "x", "path": "demo"}, headers=auth(ADMIN)),
        400,
        "name",
    )
    assert err["code"] == "too_many_models"
    assert [m["id"] for m in tenants.get("/v1/models", headers=auth(A)).json()["data"]] == [
        "onnx-genai"
    ]


def test_no_loading_at_runtime_without_a_model_root() -> None:
    with make_client(admin=True) as client:
        wait_ready(client)
        resp = client.post("/admin/models", json={"name": "x", "path": str(DEMO_MODEL_DIR)})
        assert assert_error(resp, 403)["code"] == "model_loading_disabled"


def test_health_shows_no_path_without_a_key(tenants: TestClient) -> None:
    for path in ("/health", "/healthz", "/v1/health"):
        assert "model_dir" not in tenants.get(path).json()
        wrong = tenants.get(path, headers=auth("nope"))
        assert wrong.status_code == 200 and "model_dir" not in wrong.json()
        assert tenants.get(path, headers=auth(B)).json()["model_dir"] == str(DEMO_MODEL_DIR)
    assert str(DEMO_MODEL_DIR) not in tenants.get("/health").text


# ---- render routes open without a key ----------------------------------------------------------
class _Images(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Images.hits.append(self.path)
        if self.path == "/text":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"not an image")
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def image_host() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def image_chat(url: str) -> dict[str, Any]:
    part = {"type": "image_url", "image_url": {"url": url}}
    return {"model": "qwen-vl", "messages": [{"role": "user", "content": [part]}]}


def test_an_open_render_route_takes_inline_images_only(image_host: str) -> None:
    settings = {"api_key": A, "render_open": True, "image_url_hosts": "127.0.0.1"}
    with make_client(model_dir=VISION, model_name="qwen-vl", intra_op_threads=1, **settings) as c:
        wait_ready(c)
        path = "/v1/chat/completions/render"
        answers = set()
        for url in (f"{image_host}/missing", f"{image_host}/text", "http://example.org/a.png"):
            err = assert_error(c.post(path, json=image_chat(url)), 400)
            answers.add(err["message"])
            assert "404" not in err["message"] and "image" in err["message"]
        assert len(answers) == 1 and _Images.hits == []  # nothing was fetched
        # The chat route refuses the keyless caller (401); a keyed one is fetched for.
        assert c.post("/v1/chat/completions", json=image_chat(f"{image_host}/x")).status_code == 401
        keyed = c.post(path, json=image_chat(f"{image_host}/missing"), headers=auth(A))
        assert "HTTP 404" in assert_error(keyed, 400)["message"] and _Images.hits
        # An inline image renders without a key.
        png = (VISION / "images" / "square.png").read_bytes()
        inline = "data:image/png;base64," + base64.b64encode(png).decode()
        assert c.post(path, json=image_chat(inline)).status_code == 200
