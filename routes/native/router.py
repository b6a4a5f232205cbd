"""The native API: /healthz, /v1/chat (JSON + metrics) and /v1/chat/stream (SSE)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from backends.core.handle import RequestHandle
from backends.core.request import GenerationRequest
from routes.door.convert import chat_prompt, sampling_params, timing
from routes.http.cancellation import unless_disconnected
from routes.http.deps import ERROR_RESPONSES, ModelsDep, SettingsDep
from routes.http.request_ids import request_id
from routes.http.sse import event_stream, sse_response_doc
from schemas.native import ChatRequest, ChatResponse, Health, StreamDone, StreamToken

router = APIRouter()


def chat_request(body: ChatRequest, rid: str) -> GenerationRequest:
    return GenerationRequest(
        chat_prompt(body.messages),
        sampling_params(body),
        max_tokens=body.max_tokens,
        stop=body.stop_list,
        model=body.model,
        request_id=rid,
    )


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}}, tags=["health"])
async def healthz(models: ModelsDep) -> JSONResponse:
    """Liveness, in the seed's shape for the default model, with every model's status."""
    default = models.default
    health = Health(
        status=default.status,
        device=default.device,
        model_dir=str(default.model_dir),
        models=models.statuses(),
    )
    return JSONResponse(health.model_dump(), 200 if health.status == "ok" else 503)


@router.post("/v1/chat", response_model=ChatResponse, responses=ERROR_RESPONSES, tags=["chat"])
async def chat(body: ChatRequest, models: ModelsDep, request: Request) -> ChatResponse:
    handle = await models.submit(chat_request(body, request_id(request)))
    result = await unless_disconnected(request, handle.result())
    [choice] = result.choices
    return ChatResponse(content=choice.text, metrics=timing(result.metrics, handle.model))


async def _events(handle: RequestHandle) -> AsyncIterator[str]:
    async for piece in handle:
        if piece.text:
            yield StreamToken(token=piece.text).model_dump_json()
    yield StreamDone(metrics=timing(handle.metrics(), handle.model)).model_dump_json()


@router.post(
    "/v1/chat/stream",
    responses={
        200: sse_response_doc(
            'Server-sent events: `data: {"token": ...}` (StreamToken) per decoded piece, then '
            '`data: {"done": true, "token": "[DONE]", "metrics": {...}}` (StreamDone). An '
            'error after the stream started arrives as `data: {"error": {...}}` and ends it.',
            StreamToken,
            StreamDone,
        ),
        **ERROR_RESPONSES,
    },
    tags=["chat"],
    response_class=EventSourceResponse,
)
async def chat_stream(
    body: ChatRequest, models: ModelsDep, settings: SettingsDep, request: Request
) -> EventSourceResponse:
    handle = await models.submit(chat_request(body, request_id(request)))
    return event_stream(_events(handle), settings.server.sse_ping)
