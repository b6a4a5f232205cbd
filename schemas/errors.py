"""The one error shape, OpenAI's: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | int | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def error_body(
    message: str, type_: str, *, param: str | None = None, code: str | int | None = None
) -> dict[str, Any]:
    detail = ErrorDetail(message=_sendable(message), type=type_, param=_sendable(param), code=code)
    return ErrorResponse(error=detail).model_dump()


def _sendable(text: str | None) -> str | None:
    """``text`` as UTF-8 can carry it: a message may quote a client's string, which may hold
    a lone surrogate (shown as its escape, ``\\ud800``)."""
    if text is None or text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
