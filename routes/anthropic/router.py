"""Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens, for the
``anthropic`` SDK and Claude Code.

Thin: validate, start the generation (errors here still get their status code), then answer
JSON or SSE. The logic lives in routes/anthropic/serving.py.

Errors on these paths leave in Anthropic's shape, whoever raised them. The app's handlers,
the auth middleware (401), the body limits (413, 408) and the router (404, 405) all write the
one shape; rather than teach each of them a second one, :class:`AnthropicErrors` (pure ASGI,
outside all of them) rewrites the error bodies of these paths only. Every other path is passed
through untouched, and success responses (a stream included) are never buffered.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from sse_starlette import EventSourceResponse
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from routes.anthropic import serving
from routes.http.cancellation import unless_disconnected
from routes.http.deps import ERROR_RESPONSES, ModelsDep, SettingsDep
from routes.http.request_ids import request_id
from routes.http.sse import document_event_schemas, event_stream, sse_response_doc
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

PATH = "/v1/messages"

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
    body: MessagesRequest, models: ModelsDep, settings: SettingsDep, request: Request
) -> Message | EventSourceResponse:
    handle = await models.submit(serving.messages_request(body, request_id(request)))
    if body.stream:
        payloads = serving.stream_payloads(handle, body)
        return event_stream(payloads, settings.server.sse_ping, serving.error_event)
    return await unless_disconnected(request, serving.message_response(handle, body))


@router.post(
    "/messages/count_tokens",
    response_model=CountTokensResponse,
    responses=ERRORS,
    summary="Count a message's input tokens (Anthropic)",
)
async def count_tokens(body: CountTokensRequest, models: ModelsDep) -> CountTokensResponse:
    """The prompt's tokens after the chat template: what `usage` reports for the same request
    (`input_tokens` + `cache_read_input_tokens`)."""
    prepared = await models.tokenize(serving.count_prompt(body), body.model)
    return CountTokensResponse(input_tokens=len(prepared))


# ---- errors in Anthropic's shape ---------------------------------------------------------------
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
        held: AsgiMessage | None = None  # an error's http.response.start, until its body is read
        chunks: list[bytes] = []

        async def send_reshaped(message: AsgiMessage) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] >= 400:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            reshaped = _reshape(held, body, scope.get("state", {}).get("request_id"))
            if reshaped is not None:
                body = reshaped
                MutableHeaders(scope=held)["content-length"] = str(len(body))
            await send(held)
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, send_reshaped)


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
    return json.dumps(serving.anthropic_error(start["status"], parsed, rid)).encode()


def install(app: FastAPI) -> None:
    """Mount the door: its routes, its stream events in the API description, and the error
    shape of its paths. Call it after the auth middleware is added, so that 401s are
    reshaped too (a middleware added later wraps the ones added before)."""
    app.include_router(router)
    app.openapi = document_event_schemas(app, STREAM_EVENTS)  # type: ignore[method-assign]
    app.add_middleware(AnthropicErrors)
