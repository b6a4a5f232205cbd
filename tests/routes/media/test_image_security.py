"""Images are a security boundary: every bad input is a 400 or 413 in the door's error shape
naming the part, never a 500, and the next request is served. Remote URLs are fetched only
from allowed hosts, from a test HTTP server on 127.0.0.1, cut off at the byte, time and
redirect limits."""

from __future__ import annotations

import base64
import io
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from config.settings import REPO_ROOT
from tests.conftest import make_client, wait_ready

pytestmark = pytest.mark.model

VISION = REPO_ROOT / "tests" / "hub_models" / "qwen2.5-vl"
PNG = (VISION / "images" / "square.png").read_bytes()


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (120, 30, 200)).save(out, format="PNG")
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chat(*urls: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Look"}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return {"messages": [{"role": "user", "content": parts}], "max_tokens": 2, "temperature": 0}


def assert_refused(client: TestClient, body: dict[str, Any], status: int, *words: str) -> None:
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    for word in words:
        assert word in error["message"] or word == error["param"], error
    # The server keeps serving: an image request right after works.
    ok = client.post("/v1/chat/completions", json=chat("data:image/png;base64," + b64(PNG)))
    assert ok.status_code == 200, ok.text


# ---- a test HTTP server on 127.0.0.1 -------------------------------------------------------
class Images(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        path = self.path
        if path == "/square.png":
            self._send(PNG)
        elif path == "/big.png":
            self._send(b"\x89PNG" + b"\0" * (3 * 1024 * 1024))
        elif path == "/unsized":  # no Content-Length: cut off while reading
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            for _ in range(64):
                self.wfile.write(b"\0" * 65536)
        elif path == "/slow.png":
            time.sleep(SLOW)
            self._send(PNG)
        elif path.startswith("/hop/"):
            n = int(path.rsplit("/", 1)[1])
            self.send_response(302)
            self.send_header("Location", f"/hop/{n + 1}" if n < 10 else "/square.png")
            self.end_headers()
        elif path == "/elsewhere":
            self.send_response(302)
            self.send_header("Location", "http://localhost:9/square.png")
            self.end_headers()
        else:
            self.send_response(404)
            self.end_headers()

    def _send(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# The fetch limit of the open server, generous so that a loaded machine's local redirects fit
# in it, and the slow image's delay, well past it.
FETCH_TIMEOUT = 5.0
SLOW = 15.0


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Images)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def closed() -> Iterator[TestClient]:
    """Default settings: no remote URLs; small caps to test them."""
    with make_client(
        model_dir=VISION, intra_op_threads=1, max_image_pixels=200 * 200, max_images=2
    ) as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="module")
def open_(server: str) -> Iterator[TestClient]:
    with make_client(
        model_dir=VISION,
        intra_op_threads=1,
        image_url_hosts="127.0.0.1",
        image_fetch_timeout=FETCH_TIMEOUT,
        image_fetch_redirects=3,
        max_image_mib=1.0,
    ) as c:
        wait_ready(c)
        yield c


# ---- inline data -----------------------------------------------------------------------------
def test_bad_base64(closed: TestClient) -> None:
    assert_refused(
        closed, chat("data:image/png;base64,%%%notbase64"), 400, "base64", "messages.0.content.1"
    )


def test_bytes_that_are_not_an_image(closed: TestClient) -> None:
    assert_refused(
        closed, chat("data:image/png;base64," + b64(b"notanimage" * 10)), 400, "not an image"
    )


def test_a_truncated_png(closed: TestClient) -> None:
    assert_refused(
        closed, chat("data:image/png;base64," + b64(PNG[:200])), 400, "messages.0.content.1"
    )


def test_an_unsupported_format(closed: TestClient) -> None:
    pdf = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
    assert_refused(closed, chat("data:image/png;base64," + b64(pdf)), 400, "supported format")


def test_a_data_url_that_is_not_an_image_type(closed: TestClient) -> None:
    assert_refused(closed, chat("data:text/plain;base64," + b64(PNG)), 400, "not an image type")


def test_too_many_pixels_is_413(closed: TestClient) -> None:
    assert_refused(closed, chat("data:image/png;base64," + b64(png(300, 300))), 413, "pixels")


def test_too_many_images_is_413(closed: TestClient) -> None:
    url = "data:image/png;base64," + b64(PNG)
    assert_refused(closed, chat(url, url, url), 413, "3 images")


def test_other_formats_are_decoded_by_the_server(closed: TestClient) -> None:
    """A GIF and a WebP are decoded here (the model's own decoder never sees client bytes)."""
    for fmt in ("GIF", "WEBP", "JPEG"):
        out = io.BytesIO()
        Image.open(io.BytesIO(PNG)).save(out, format=fmt)
        r = closed.post(
            "/v1/chat/completions",
            json=chat(f"data:image/{fmt.lower()};base64," + b64(out.getvalue())),
        )
        assert r.status_code == 200, (fmt, r.text)


# ---- URLs --------------------------------------------------------------------------------------
def test_remote_urls_are_refused_by_default(closed: TestClient, server: str) -> None:
    assert_refused(
        closed, chat(f"{server}/square.png"), 400, "no remote image URLs", "GENAI_IMAGE_URL_HOSTS"
    )


def test_file_and_other_schemes_are_refused(open_: TestClient) -> None:
    assert_refused(open_, chat("file:///etc/passwd"), 400, "not file:")
    assert_refused(open_, chat("ftp://127.0.0.1/x.png"), 400, "not ftp:")


def test_an_allowed_host_is_fetched(open_: TestClient, server: str) -> None:
    r = open_.post("/v1/chat/completions", json=chat(f"{server}/square.png"))
    assert r.status_code == 200, r.text
    inline = open_.post("/v1/chat/completions", json=chat("data:image/png;base64," + b64(PNG)))
    assert r.json()["choices"][0]["message"] == inline.json()["choices"][0]["message"]


def test_a_host_not_allowed_is_refused(open_: TestClient, server: str) -> None:
    port = server.rsplit(":", 1)[1]
    assert_refused(
        open_, chat(f"http://localhost:{port}/square.png"), 400, "'localhost'", "not allowed"
    )


def test_byte_limit_declared_and_streamed(open_: TestClient, server: str) -> None:
    assert_refused(open_, chat(f"{server}/big.png"), 413, "bytes")
    assert_refused(open_, chat(f"{server}/unsized"), 413, "bytes")


def test_time_limit(open_: TestClient, server: str) -> None:
    started = time.perf_counter()
    assert_refused(open_, chat(f"{server}/slow.png"), 400, f"within {FETCH_TIMEOUT:g} s")
    assert time.perf_counter() - started < SLOW - 1  # cut off at the limit, not at the answer


def test_redirect_limit_and_redirect_checks(open_: TestClient, server: str) -> None:
    r = open_.post("/v1/chat/completions", json=chat(f"{server}/hop/9"))
    assert r.status_code == 200, r.text  # 2 redirects: within the limit of 3
    assert_refused(open_, chat(f"{server}/hop/1"), 400, "redirected more than 3")
    assert_refused(open_, chat(f"{server}/elsewhere"), 400, "'localhost'")


def test_a_missing_image_is_a_400(open_: TestClient, server: str) -> None:
    assert_refused(open_, chat(f"{server}/nothing.png"), 400, "HTTP 404")


def test_text_requests_stream_while_an_image_is_decoded(
    closed: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding runs off the event loop: while one image's decoding is held, a text request
    streams to its end, and other image requests are served; then the held one completes."""
    from routes.door import media

    entered, release = threading.Event(), threading.Event()
    real = media.decode_image  # type: ignore[attr-defined]

    def held(data: bytes, param: str, limits: Any) -> Any:
        if not entered.is_set():
            entered.set()
            assert release.wait(30)
        return real(data, param, limits)

    monkeypatch.setattr(media, "decode_image", held)
    results: dict[str, Any] = {}

    def image_request() -> None:
        results["held"] = closed.post(
            "/v1/chat/completions", json=chat("data:image/png;base64," + b64(PNG))
        )

    thread = threading.Thread(target=image_request)
    thread.start()
    try:
        assert entered.wait(30)
        text = {"messages": [{"role": "user", "content": "Tell me about rivers"}], "max_tokens": 8}
        with closed.stream("POST", "/v1/chat/completions", json={**text, "stream": True}) as r:
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert r.status_code == 200 and lines[-1] == "data: [DONE]" and len(lines) > 2
        other = closed.post("/v1/chat/completions", json=chat("data:image/png;base64," + b64(PNG)))
        assert other.status_code == 200
        assert not results  # the first image request is still held
    finally:
        release.set()
        thread.join(30)
    assert results["held"].status_code == 200
    assert results["held"].json()["choices"][0]["message"] == other.json()["choices"][0]["message"]
