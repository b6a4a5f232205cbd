"""Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens, for the
``anthropic`` SDK and Claude Code.

Thin: validate, start the generation (errors here still get their status code), then answer
JSON or SSE. The logic lives in routes/anthropic/serving.py; errors on these paths leave in
Anthropic's shape (routes/anthropic/errors.py).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from sse_starlette import EventSourceResponse

from backends.core.request import GenerationRequest
from routes.anthropic import serving
from routes.anthropic.errors import AnthropicErrors
from routes.door.answer import answer
from routes.door.fields import client_names, door_names, submit
from routes.door.media import load_media
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from routes.http.sse import document_event_schemas, sse_response_doc
from schemas.anthropic import (
    AnthropicErrorResponse,
    ContentBlockDeltaEvent,
    ContentBlockStartEvent,
    ContentBlockStopEvent,
    CountTokensRequest,
    CountTokensResponse,
    Message,
    MessageDeltaEvent,
    MessagesRequest,
    MessageStartEvent,
    MessageStopEvent,
    PingEvent,
)

# What the stream sends, one JSON object per event (documented in OpenAPI).
STREAM_EVENTS = (
    MessageStartEvent,
    PingEvent,
    ContentBlockStartEvent,
    ContentBlockDeltaEvent,
    ContentBlockStopEvent,
    MessageDeltaEvent,
    MessageStopEvent,
    AnthropicErrorResponse,
)

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {**doc, "model": AnthropicErrorResponse} for status, doc in ERROR_RESPONSES.items()
}

router = APIRouter(prefix="/v1", tags=["anthropic"])


@router.post(
    "/messages",
    response_model=Message,
    responses={
        200: sse_response_doc(
            "A message. With `stream: true`: server-sent events, each `event: <type>` with "
            "`data: <event>` (see components/schemas): message_start, ping, then per content "
            "block content_block_start, content_block_delta..., content_block_stop, then "
            "message_delta and message_stop. An error after the stream started arrives as "
            "`event: error` and ends the stream.",
            *STREAM_EVENTS,
        ),
        **ERRORS,
    },
    summary="Create a message (Anthropic)",
)
async def create_message(
    body: MessagesRequest, models: ModelsDep, request: Request
) -> Message | EventSourceResponse:
    messages = await load_media(request, serving.messages_request(body, request_id(request)))
    handle = await submit(models, messages)
    return await answer(request, serving.MESSAGES, handle, body, stream=body.stream)


@router.post(
    "/messages/count_tokens",
    response_model=CountTokensResponse,
    responses=ERRORS,
    summary="Count a message's input tokens (Anthropic)",
)
async def count_tokens(
    body: CountTokensRequest, models: ModelsDep, request: Request
) -> CountTokensResponse:
    """The prompt's tokens after the chat template (images expanded to their image tokens):
    what `usage` reports for the same request (`input_tokens` + `cache_read_input_tokens`)."""
    counted = GenerationRequest(serving.count_prompt(body), model=body.model)
    prompt = (await load_media(request, counted)).prompts[0]
    with client_names(door_names(prompt)):
        prepared = await models.tokenize(prompt, body.model)
    return CountTokensResponse(input_tokens=len(prepared))


def install(app: FastAPI) -> None:
    """Mount the door: its routes, its stream events in the API description, and the error
    shape of its paths. Call it after the auth middleware is added, so that 401s are
    reshaped too (a middleware added later wraps the ones added before)."""
    app.include_router(router)
    app.openapi = document_event_schemas(app, STREAM_EVENTS)  # type: ignore[method-assign]
    app.add_middleware(AnthropicErrors)
