"""Server-sent events for every streaming door.

Once a stream has started its status code cannot change, so a failure after that is one
in-band event, and the stream ends there: the error policy's body (routes/http/errors.py), as
``data: {"error": {...}}`` in the one shape or as the door's own ``error_event``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from sse_starlette import EventSourceResponse

from routes.http.errors import failure
from schemas.errors import ErrorResponse

Payload = str | tuple[str, str]
# A door's own error event: (status, the error body in the one shape) -> the payload to send.
ErrorEvent = Callable[[int, dict[str, Any]], Payload]


def _event(payload: Payload) -> dict[str, str]:
    if isinstance(payload, tuple):
        return {"event": payload[0], "data": payload[1]}
    return {"data": payload}


async def sse_events(
    payloads: AsyncIterator[Payload], error_event: ErrorEvent | None = None
) -> AsyncIterator[dict[str, str]]:
    """Each payload is an event's ``data``, or an ``(event, data)`` pair for a named event.
    Any exception ends the stream with one error event: ``error_event`` reshapes it for a
    protocol with its own (Anthropic's, Responses'). A client that left is not an exception
    here (the task is cancelled), so it gets no event."""
    try:
        async for payload in payloads:
            yield _event(payload)
    except Exception as exc:
        f = failure(exc, during="stream")
        yield _event(error_event(f.status, f.body) if error_event else json.dumps(f.body))


def sse_response_doc(
    description: str, *events: type[BaseModel], done: bool = False
) -> dict[str, Any]:
    """The OpenAPI response of a streaming route: a text/event-stream body. As OpenAPI 3.1
    reads a stream's ``schema`` (3.2's ``itemSchema``), it describes one event: its ``data``
    is JSON, one of ``events`` or an error, or (``done``: OpenAI's streams) the literal
    ``[DONE]``; the event models are listed under components/schemas
    (:func:`document_event_schemas`)."""
    models: tuple[type[BaseModel], ...] = (*events, ErrorResponse)
    refs = [{"$ref": f"#/components/schemas/{m.__name__}"} for m in models]
    data: dict[str, Any] = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {"anyOf": refs},
    }
    if done:
        data = {"anyOf": [data, {"const": "[DONE]"}]}
    event = {
        "type": "object",
        "properties": {
            "data": data,
            "event": {"type": "string"},
            "id": {"type": "string"},
            "retry": {"type": "integer"},
        },
        "required": ["data"],
    }
    return {"description": description, "content": {"text/event-stream": {"schema": event}}}


def event_stream(
    payloads: AsyncIterator[Payload], ping: float, error_event: ErrorEvent | None = None
) -> EventSourceResponse:
    """An SSE response of ``data:`` payloads, with keep-alive comments every ``ping`` s.

    Lines end with ``\\n`` and events with a blank line (``\\n\\n``), not sse-starlette's
    default ``\\r\\n``: the spec allows all three line endings, but a client that splits the
    body on ``"\\n\\n"`` (a browser ``fetch`` reader, many scripts) would see no event at all."""
    return EventSourceResponse(sse_events(payloads, error_event), ping=ping, sep="\n")


def document_event_schemas(
    app: FastAPI, events: Sequence[type[BaseModel]]
) -> Callable[[], dict[str, Any]]:
    """An ``app.openapi`` that also lists the streamed events' schemas (used by no JSON
    response) under components/schemas, where the stream descriptions point."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = original()
        # Validation mode: ChatDelta's serializer (which drops unset fields) has no schema.
        _, defs = models_json_schema(
            [(model, "validation") for model in events],
            ref_template="#/components/schemas/{model}",
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in defs.get("$defs", {}).items():
            components.setdefault(name, definition)
        app.openapi_schema = schema
        return schema

    return openapi
