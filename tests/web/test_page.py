"""The web playground's files through the real app: served at /, open without the API key
(while its API calls are not), gone with GENAI_WEB_UI=false, self-contained (no CDN), and
every other path answered by the API as before."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from routes.web import WEB_DIR, page_paths
from tests.conftest import assert_error, make_client

pytestmark = pytest.mark.model

KEY = "page-key"


@pytest.fixture(scope="module")
def keyed() -> Iterator[TestClient]:
    with make_client(api_key=KEY) as c:
        yield c


def test_the_page_and_its_files_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.text == client.get("/index.html").text
    for path, kind in (("/app.js", "javascript"), ("/style.css", "text/css")):
        resp = client.get(path)
        assert resp.status_code == 200 and kind in resp.headers["content-type"], path
        assert resp.headers["x-request-id"]


def test_page_paths_are_the_folders_files() -> None:
    files = {f"/{p.relative_to(WEB_DIR).as_posix()}" for p in WEB_DIR.rglob("*") if p.is_file()}
    assert page_paths() == files | {"/"}
    assert {"/index.html", "/app.js", "/style.css"} <= files


def test_page_paths_of_nested_folders(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for name in ("index.html", "docs/index.html", "docs/a.js"):
        (tmp_path / name).write_text("x")
    assert page_paths(tmp_path) == {
        "/",
        "/index.html",
        "/docs/",
        "/docs/index.html",
        "/docs/a.js",
    }


def test_the_page_is_self_contained() -> None:
    html = (WEB_DIR / "index.html").read_text()
    links = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert links, "index.html links no file"
    for link in links:
        assert (WEB_DIR / link).is_file(), f"index.html links {link}, not a file of the page"
    script = (WEB_DIR / "app.js").read_text()
    for url in re.findall(r'fetch\(\s*"([^"]+)"', script):
        assert url.startswith(("v1/", "api/")), f"the page fetches {url}: only the API, relatively"
    for text in (html, script, (WEB_DIR / "style.css").read_text()):
        assert not re.search(r"(?:src|href|url|import|fetch)\(?\s*[\"']?(?:https?:)?//", text)


def test_the_page_is_open_but_the_api_needs_the_key(keyed: TestClient) -> None:
    for path in page_paths():
        assert keyed.get(path).status_code == 200, path
    assert_error(keyed.get("/v1/models"), 401)
    assert_error(keyed.post("/v1/chat/completions", json={}), 401)
    assert_error(keyed.get("/nope.js"), 401)  # only the page's own files are open
    ok = keyed.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200


def test_other_paths_keep_the_apis_answers(client: TestClient) -> None:
    assert_error(client.get("/nope"), 404)
    assert_error(client.get("/index.htm"), 404)
    assert_error(client.get("/v1/chat/completions"), 405)
    assert_error(client.post("/"), 405)  # a page file: read-only


def test_the_setting_turns_the_page_off() -> None:
    with make_client(web_ui=False) as c:
        root = c.get("/")  # Ollama's liveness answer (routes/ollama), not the page
        assert root.status_code == 200 and root.text == "Ollama is running"
        assert_error(c.get("/app.js"), 404)
    with make_client(web_ui=False, api_key=KEY) as c:
        assert_error(c.get("/"), 401)
