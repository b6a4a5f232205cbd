"""A limit on request bodies (``GENAI_MAX_BODY_MIB``), answered with 413 before it is read.

Without it a 50 MB body was read, parsed and tokenized: RSS grew by a gigabyte and every other
stream stalled. A declared ``Content-Length`` over the limit is refused before a byte of the
body is read; a body sent without one (chunked) is read here, up to the limit, and refused
once past it (FastAPI would turn an error raised while it reads the body into a 400).
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas.errors import error_body


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, *, parse: bool) -> None:
        if parse:
            body = error_body("Content-Length is not a number.", "invalid_request_error")
        else:
            message = (
                f"The request body is larger than this server accepts ({self.max_bytes} "
                "bytes; GENAI_MAX_BODY_MIB)."
            )
            body = error_body(message, "invalid_request_error", code="request_too_large")
        await JSONResponse(body, 400 if parse else 413)(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.max_bytes:
                await self._refuse(scope, receive, send, parse=not declared.isdigit())
                return
            await self.app(scope, receive, send)  # the server holds the body to its length
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(scope, receive, send, parse=False)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)


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
