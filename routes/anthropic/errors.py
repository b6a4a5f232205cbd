"""Errors on Anthropic's paths, in Anthropic's shape: ``{"type": "error", "error": {"type",
"message"}}``, whoever raised them.

The app's handlers, the auth middleware (401), the body limits (413, 408) and the router (404,
405) all write the one shape; rather than teach each of them a second one,
:class:`AnthropicErrors` (pure ASGI, outside all of them) rewrites the error bodies of these
paths only. Every other path is passed through untouched, and success responses (a stream
included) are never buffered. A bug's 500 is answered by Starlette's outermost middleware,
outside this one, so the reshaper answers it itself, by the same policy. A stream that fails
after it started ends with an ``error`` event carrying the same body (:func:`error_event`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from routes.http.errors import failure
from schemas.anthropic import AnthropicErrorDetail, AnthropicErrorResponse, AnthropicErrorType

PATH = "/v1/messages"

_ERROR_TYPES: dict[int, AnthropicErrorType] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",  # not ready, shutting down, cancelled by an operator
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> AnthropicErrorType:
    return _ERROR_TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")


def anthropic_error(
    status: int, body: Mapping[str, Any], request_id: str | None = None
) -> dict[str, Any]:
    """An error body in the one shape (OpenAI's, as every handler makes it) in Anthropic's:
    ``{"type": "error", "error": {"type", "message"}}``; the parameter, which Anthropic's shape
    has no field for, leads the message unless the message names it already."""
    detail = body.get("error")
    detail = detail if isinstance(detail, Mapping) else {}
    message = str(detail.get("message") or "Error.")
    param = detail.get("param")
    if param and str(param) not in message:
        message = f"{param}: {message}"
    error = AnthropicErrorDetail(type=error_type(status), message=message)
    return AnthropicErrorResponse(error=error, request_id=request_id).model_dump(exclude_none=True)


def error_event(status: int, body: dict[str, Any]) -> tuple[str, str]:
    """The ``error`` event that ends a stream that failed after it started."""
    return "error", json.dumps(anthropic_error(status, body))


# ---- the reshaper ------------------------------------------------------------------------------
def _ours(path: str) -> bool:
    return path == PATH or path.startswith(PATH + "/")


class AnthropicErrors:
    """Rewrites JSON error bodies (status ≥ 400) on /v1/messages... to Anthropic's shape."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _ours(scope["path"]):
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
            reshaped = _reshape(held, body, rid)
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
            body = json.dumps(anthropic_error(f.status, f.body, rid)).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ]
            await send({"type": "http.response.start", "status": f.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            raise  # still the server's to log, as Starlette does for every path


def _reshape(start: AsgiMessage, body: bytes, rid: str | None) -> bytes | None:
    """The body in Anthropic's shape, or None if it is not a JSON error body."""
    if not MutableHeaders(scope=start).get("content-type", "").startswith("application/json"):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("error"), dict):
        return None
    return json.dumps(anthropic_error(start["status"], parsed, rid)).encode()
