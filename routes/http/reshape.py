"""Errors in a door's own shape, on that door's paths, whoever raised them.

The app's handlers, the auth middleware (401), the body limits (413, 408) and the router (404,
405) all write the one shape (routes/http/errors.py); rather than teach each of them a second
one, :class:`ErrorReshaper` (pure ASGI, outside all of them) rewrites the JSON error bodies of
one door's paths. Every other path is passed through untouched, and success responses (a
stream included) are never buffered. A bug's 500 is answered by Starlette's outermost
middleware, outside this one, so the reshaper answers it itself, by the same policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from routes.http.errors import failure

# (status, the error body in the one shape, the request id) -> the body in the door's shape.
Reshape = Callable[[int, Mapping[str, Any], str | None], dict[str, Any]]


def one_shape_message(body: Mapping[str, Any]) -> str:
    """The message of an error body in the one shape, led by its parameter unless it names
    it already (for shapes with no field for the parameter)."""
    detail = body.get("error")
    detail = detail if isinstance(detail, Mapping) else {}
    message = str(detail.get("message") or "Error.")
    param = detail.get("param")
    if param and str(param) not in message:
        message = f"{param}: {message}"
    return message


class ErrorReshaper:
    """Rewrites JSON error bodies (status ≥ 400) on the paths ``ours`` accepts with
    ``reshape``."""

    def __init__(self, app: ASGIApp, ours: Callable[[str], bool], reshape: Reshape) -> None:
        self.app = app
        self.ours = ours
        self.reshape = reshape

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.ours(scope["path"]):
            await self.app(scope, receive, send)
            return
        rid = scope.get("state", {}).get("request_id")
        held: AsgiMessage | None = None  # an error's http.response.start, until its body is read
        started = False
        chunks: list[bytes] = []

        async def send_reshaped(message: AsgiMessage) -> None:
            nonlocal held, started
            if message["type"] == "http.response.start":
                started = True
                if message["status"] >= 400:
                    held = message
                    return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            reshaped = self._reshaped(held, body, rid)
            if reshaped is not None:
                body = reshaped
                MutableHeaders(scope=held)["content-length"] = str(len(body))
            await send(held)
            await send({"type": "http.response.body", "body": body})

        try:
            await self.app(scope, receive, send_reshaped)
        except Exception as exc:  # a bug: no handler answered it
            if started:
                raise
            f = failure(exc)
            body = json.dumps(self.reshape(f.status, f.body, rid)).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ]
            await send({"type": "http.response.start", "status": f.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            raise  # still the server's to log, as Starlette does for every path

    def _reshaped(self, start: AsgiMessage, body: bytes, rid: str | None) -> bytes | None:
        """The body in the door's shape, or None if it is not a JSON error body."""
        if not MutableHeaders(scope=start).get("content-type", "").startswith("application/json"):
            return None
        try:
            parsed = json.loads(body)
        except ValueError:
            return None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("error"), dict):
            return None
        return json.dumps(self.reshape(start["status"], parsed, rid)).encode()
