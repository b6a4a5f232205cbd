"""OpenAI-compatible routes: /v1/chat/completions, /v1/completions, /v1/models.

Thin: validate, start the generations (errors here still get their status code), then answer
JSON or SSE. The logic lives in routes/openai_serving.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from sse_starlette import EventSourceResponse

from backends.errors import GenAIError
from routes import openai_serving as serving
from routes.cancellation import unless_disconnected
from routes.deps import ServiceDep, SettingsDep
from routes.middleware import request_id
from schemas.errors import ErrorResponse, error_body
from schemas.openai import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Completion,
    CompletionRequest,
    ModelCard,
    ModelList,
)

log = logging.getLogger("genai.openai")

router = APIRouter(prefix="/v1", tags=["openai"])

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Invalid request, or context length exceeded"},
    401: {"model": ErrorResponse, "description": "Missing or invalid API key (if one is set)"},
    404: {"model": ErrorResponse, "description": "Unknown model"},
    429: {"model": ErrorResponse, "description": "At capacity; retry after `Retry-After`"},
    500: {"model": ErrorResponse, "description": "Generation failed"},
    503: {"model": ErrorResponse, "description": "The model is not ready, or shutting down"},
    504: {"model": ErrorResponse, "description": "GENAI_REQUEST_TIMEOUT exceeded"},
}


def _with_stream(chunk: type[BaseModel], what: str) -> dict[int | str, dict[str, Any]]:
    stream = {
        "description": f"{what}. With `stream: true`: server-sent events, each "
        f"`data: <{chunk.__name__}>`, ended by `data: [DONE]`. An error after the stream "
        'started arrives as `data: {"error": {...}}` and ends the stream.',
        "content": {
            "text/event-stream": {"schema": {"$ref": f"#/components/schemas/{chunk.__name__}"}}
        },
    }
    return {200: stream, **ERRORS}


async def sse_events(chunks: AsyncIterator[BaseModel]) -> AsyncIterator[dict[str, str]]:
    try:
        async for chunk in chunks:
            yield {"data": chunk.model_dump_json()}
    except GenAIError as exc:
        body = error_body(exc.message, exc.error_type, param=exc.param, code=exc.code)
        yield {"data": json.dumps(body)}
        return
    except Exception:
        log.exception("stream failed")
        yield {"data": json.dumps(error_body("Internal server error.", "server_error"))}
        return
    yield {"data": "[DONE]"}


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses=_with_stream(ChatCompletionChunk, "A chat completion"),
    summary="Chat completion (OpenAI)",
)
async def chat_completions(
    body: ChatCompletionRequest, service: ServiceDep, settings: SettingsDep, request: Request
) -> ChatCompletion | EventSourceResponse:
    run = await serving.start_chat(service, body, request_id(request))
    if body.stream:
        chunks = serving.chat_chunks(service, run)
        return EventSourceResponse(sse_events(chunks), ping=settings.sse_ping)
    return await unless_disconnected(request, serving.chat_response(service, run))


@router.post(
    "/completions",
    response_model=Completion,
    responses=_with_stream(Completion, "A text completion (no chat template)"),
    summary="Text completion (OpenAI)",
)
async def completions(
    body: CompletionRequest, service: ServiceDep, settings: SettingsDep, request: Request
) -> Completion | EventSourceResponse:
    run = await serving.start_completion(service, body, request_id(request))
    if body.stream:
        chunks = serving.completion_chunks(service, run)
        return EventSourceResponse(sse_events(chunks), ping=settings.sse_ping)
    return await unless_disconnected(request, serving.completion_response(service, run))


@router.get("/models", response_model=ModelList, responses={401: ERRORS[401]})
async def list_models(service: ServiceDep) -> ModelList:
    return serving.model_list(service)


@router.get("/models/{model_id}", response_model=ModelCard, responses=ERRORS)
async def get_model(model_id: str, service: ServiceDep) -> ModelCard:
    service.check_model_name(model_id)
    return serving.model_card(service)


def document_stream_chunks(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """Add the SSE chunk schemas (used by no JSON response) to the OpenAPI components."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = original()
        # Validation mode: ChatDelta's serializer (which drops unset fields) has no schema.
        _, defs = models_json_schema(
            [(ChatCompletionChunk, "validation"), (Completion, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in defs.get("$defs", {}).items():
            components.setdefault(name, definition)
        app.openapi_schema = schema
        return schema

    return openapi
