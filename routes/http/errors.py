"""The error policy: what a failure tells the client, and the exception handlers that answer
with it. Every error leaves the server in OpenAI's shape (a door with its own shape reshapes
it); a stream that fails after it started ends with the same body as an in-band event."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from backends.errors import GenAIError
from routes.http.cancellation import ClientDisconnected
from schemas.errors import error_body

log = logging.getLogger("genai.errors")


@dataclass(frozen=True)
class Failure:
    """A failure as the client is told it: a status and a body in the one shape."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def failure(exc: Exception, during: str = "request") -> Failure:
    """The one policy, before a stream (the response) and during one (its last event): a
    :class:`GenAIError` says what went wrong; anything else is a bug, logged with its
    traceback and told as a generic internal error (its text may hold what the client must
    not see)."""
    if isinstance(exc, GenAIError):
        body = error_body(exc.message, exc.error_type, param=exc.param, code=exc.code)
        return Failure(exc.status_code, body, exc.headers)
    log.exception("unhandled error during the %s", during, exc_info=exc)
    return Failure(500, error_body("Internal server error.", "server_error"))


def validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """One readable sentence and the offending parameter, from pydantic's first error."""
    errors = exc.errors()
    err = errors[0] if errors else {"msg": "Invalid request", "loc": ()}
    if err.get("type") == "json_invalid":
        return "The request body is not valid JSON.", None
    loc = [str(p) for p in err.get("loc", ()) if p != "body"]
    ctx = err.get("ctx")
    if err.get("type") == "not_unicode" and isinstance(ctx, dict):  # the place is inside
        loc += [p for p in str(ctx.get("field", "")).split(".") if p]
    param = ".".join(loc) or None
    msg = str(err.get("msg", "Invalid request"))
    return (f"{param}: {msg}" if param else msg), param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = validation_message(exc)
        return JSONResponse(error_body(message, "invalid_request_error", param=param), 400)

    @app.exception_handler(GenAIError)
    async def _genai(_: Request, exc: GenAIError) -> JSONResponse:
        return _answer(failure(exc))

    @app.exception_handler(ClientDisconnected)
    async def _gone(_: Request, exc: ClientDisconnected) -> JSONResponse:
        # Nobody reads this; 499 ("client closed request") keeps access logs honest.
        return JSONResponse(error_body("Client closed the request.", "client_closed"), 499)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSONResponse(
            error_body(str(exc.detail), kind, code=exc.status_code),
            exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        return _answer(failure(exc))


def _answer(f: Failure) -> JSONResponse:
    return JSONResponse(f.body, f.status, headers=f.headers or None)
