"""Errors on Anthropic's paths, in Anthropic's shape: ``{"type": "error", "error": {"type",
"message"}}``, whoever raised them (:class:`AnthropicErrors`, over routes/http/reshape.py). A
stream that fails after it started ends with an ``error`` event carrying the same body
(:func:`error_event`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp

from routes.http.reshape import ErrorReshaper, one_shape_message
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
    error = AnthropicErrorDetail(type=error_type(status), message=one_shape_message(body))
    return AnthropicErrorResponse(error=error, request_id=request_id).model_dump(exclude_none=True)


def error_event(status: int, body: dict[str, Any]) -> tuple[str, str]:
    """The ``error`` event that ends a stream that failed after it started."""
    return "error", json.dumps(anthropic_error(status, body))


# ---- the reshaper ------------------------------------------------------------------------------
def _ours(path: str) -> bool:
    return path == PATH or path.startswith(PATH + "/")


class AnthropicErrors(ErrorReshaper):
    """Rewrites JSON error bodies (status ≥ 400) on /v1/messages... to Anthropic's shape."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app, _ours, anthropic_error)
