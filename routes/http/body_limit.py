"""Limits on request bodies: their size (``GENAI_MAX_BODY_MIB``) and how long they may take to
arrive (``GENAI_CLIENT_TIMEOUT``).

Without them a 50 MB body was read, parsed and tokenized (RSS grew by a gigabyte and every
other stream stalled), and a client could trickle a body forever. A declared
``Content-Length`` over the limit is a 413 before a byte is read; otherwise the body is read
here, counted as it arrives (413 once past the limit) and timed (408 if it is late), then
handed to the app. (Raised from inside the app's own read, FastAPI turns these into a 400.)
"""

from __future__ import annotations

import asyncio

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas.errors import error_body


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int, timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int) -> None:
        if status == 400:
            body = error_body("Content-Length is not a number.", "invalid_request_error")
        elif status == 408:
            message = (
                f"The request body did not arrive within {self.timeout:g} s (GENAI_CLIENT_TIMEOUT)."
            )
            body = error_body(message, "invalid_request_error", code="body_timeout")
        else:
            message = (
                f"The request body is larger than this server accepts ({self.max_bytes} "
                "bytes; GENAI_MAX_BODY_MIB)."
            )
            body = error_body(message, "invalid_request_error", code="request_too_large")
        await JSONResponse(body, status)(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and not declared.isdigit():
            await self._refuse(scope, receive, send, 400)
            return
        if declared is not None and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send, 413)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.timeout)
        except _TooLarge:
            await self._refuse(scope, receive, send, 413)
            return
        except asyncio.TimeoutError:
            await self._refuse(scope, receive, send, 408)
            return
        if body is not None:
            await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None if the client went away."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                raise _TooLarge
            if not message.get("more_body", False):
                return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the app the body read already, then the client's later messages
    (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
