"""Errors on Ollama's paths (/api/*), in Ollama's shape: ``{"error": "..."}`` with the status
of the one policy (400 bad input, 404 unknown model, ...), whoever raised them
(:class:`OllamaErrors`, over routes/http/reshape.py). A stream that fails after it started
ends with one such object as its last line (:func:`error_line`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp

from backends.errors import InvalidRequest
from routes.http.reshape import ErrorReshaper, one_shape_message
from schemas.ollama import OllamaError

PREFIX = "/api"


class NotHere(InvalidRequest):
    """An Ollama route for what this server does another way (pulling, creating models): a
    request it will not do, told as the client's error (no 5xx: nothing went wrong here)."""

    code = "not_supported"


def ollama_error(
    status: int, body: Mapping[str, Any], request_id: str | None = None
) -> dict[str, Any]:
    """An error body in the one shape in Ollama's; the parameter, which Ollama's shape has no
    field for, leads the message unless the message names it already."""
    return OllamaError(error=one_shape_message(body)).model_dump()


def error_line(status: int, body: dict[str, Any]) -> str:
    """The last line of a stream that failed after it started."""
    return json.dumps(ollama_error(status, body))


def _ours(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


class OllamaErrors(ErrorReshaper):
    """Rewrites JSON error bodies (status ≥ 400) on /api/... to Ollama's shape."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app, _ours, ollama_error)
