"""Request IDs: every response carries ``X-Request-ID`` (the client's, or a new one)."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "x-request-id"
_SAFE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def request_id(request: Request) -> str:
    rid: str = request.scope.get("state", {}).get("request_id") or uuid.uuid4().hex
    return rid


class RequestIdMiddleware:
    """Pure ASGI (streams pass through untouched), outermost so error responses get it too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(HEADER.encode(), b"").decode("latin-1")
        rid = given if _SAFE.match(given) else f"req-{uuid.uuid4().hex}"
        scope.setdefault("state", {})["request_id"] = rid

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = rid
            await send(message)

        await self.app(scope, receive, send_with_id)
