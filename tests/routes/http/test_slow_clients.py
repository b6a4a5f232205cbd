"""Slow clients against a real server: trickled headers are cut off, a late body gets 408, and
everyone else is served meanwhile."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from bench.harness.server import ServerProcess, live_server

pytestmark = pytest.mark.live

TIMEOUT = 1.0  # GENAI_CLIENT_TIMEOUT for these servers


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with live_server(GENAI_CLIENT_TIMEOUT=str(TIMEOUT)) as running:
        yield running


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing, or None if it was still open after ``seconds``."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except TimeoutError:
        return None
    return received


def test_headers_trickled_a_byte_at_a_time_are_cut_off(server: ServerProcess) -> None:
    slow = connect(server)
    started = time.monotonic()
    served = 0
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    for byte in request:
        try:
            slow.sendall(bytes([byte]))
        except OSError:  # the server has closed it
            break
        # Others are served while the slow one dawdles.
        served += httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
        time.sleep(0.1)
        if time.monotonic() - started > 4 * TIMEOUT:
            break
    assert closed_within(slow, 4 * TIMEOUT) is not None, "the slow connection is still open"
    assert time.monotonic() - started < 4 * TIMEOUT + 1
    assert served >= 3
    slow.close()


def test_a_body_that_does_not_arrive_gets_408(server: ServerProcess) -> None:
    slow = connect(server)
    slow.sendall(
        b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"prompt"'
    )
    answer = closed_within(slow, 4 * TIMEOUT) or b""
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"body_timeout" in answer
    slow.close()


def test_an_idle_connection_after_a_response_is_closed(server: ServerProcess) -> None:
    sock = connect(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = b""
    while b"\r\n\r\n" not in first:  # the whole head of the answer, however slow it comes
        piece = sock.recv(4096)
        assert piece, first
        first += piece
    assert first.startswith(b"HTTP/1.1 200")
    sock.sendall(b"GET /hea")  # the next request's headers, never finished
    assert closed_within(sock, 4 * TIMEOUT) is not None
    sock.close()
