"""Server-sent events for every streaming door.

Once a stream has started its status code cannot change, so a failure after that is one
in-band ``data: {"error": {...}}`` event in the one error shape, and the stream ends there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from sse_starlette import EventSourceResponse

from backends.errors import GenAIError
from schemas.errors import ErrorResponse, error_body

log = logging.getLogger("genai.sse")


async def sse_events(payloads: AsyncIterator[str]) -> AsyncIterator[dict[str, str]]:
    try:
        async for payload in payloads:
            yield {"data": payload}
    except GenAIError as exc:
        body = error_body(exc.message, exc.error_type, param=exc.param, code=exc.code)
        yield {"data": json.dumps(body)}
    except Exception:
        log.exception("stream failed")
        yield {"data": json.dumps(error_body("Internal server error.", "server_error"))}


def sse_response_doc(description: str, *events: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI response of a streaming route: a text/event-stream body. As OpenAPI 3.1
    reads a stream's ``schema`` (3.2's ``itemSchema``), it describes one event: its ``data``
    is JSON, one of ``events`` or an error (or the literal ``[DONE]`` where the text says so);
    the event models are listed under components/schemas (:func:`document_event_schemas`)."""
    models: tuple[type[BaseModel], ...] = (*events, ErrorResponse)
    refs = [{"$ref": f"#/components/schemas/{m.__name__}"} for m in models]
    event = {
        "type": "object",
        "properties": {
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"anyOf": refs},
            },
            "event": {"type": "string"},
            "id": {"type": "string"},
            "retry": {"type": "integer"},
        },
        "required": ["data"],
    }
    return {"description": description, "content": {"text/event-stream": {"schema": event}}}


def event_stream(payloads: AsyncIterator[str], ping: float) -> EventSourceResponse:
    """An SSE response of ``data:`` payloads, with keep-alive comments every ``ping`` s."""
    return EventSourceResponse(sse_events(payloads), ping=ping)


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
