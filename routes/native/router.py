"""The native API: /healthz (also /health and /v1/health), /v1/chat (JSON + metrics) and
/v1/chat/stream (SSE)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from routes.door.answer import answer
from routes.door.fields import submit
from routes.door.media import load_media
from routes.http.auth import request_owner
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from routes.http.sse import sse_response_doc
from routes.native import serving
from schemas.native import ChatRequest, ChatResponse, Health, StreamDone, StreamToken

router = APIRouter()


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}}, tags=["health"])
# The names other servers' probes use: KServe's (vLLM's /health) and benchmark clients'.
@router.get("/health", response_model=Health, responses={503: {"model": Health}}, tags=["health"])
@router.get(
    "/v1/health", response_model=Health, responses={503: {"model": Health}}, tags=["health"]
)
async def healthz(models: ModelsDep, request: Request) -> JSONResponse:
    """Liveness, in the seed's shape for the default model, with every model's status; the
    default model's folder (``model_dir``) only for a caller with a valid API key."""
    default = models.default
    health = Health(
        status=models.status,  # a default model loaded on first use is ready to serve
        device=default.device,
        model_dir=str(default.model_dir) if request_owner(request) is not None else None,
        models=models.statuses(),
        modalities=models.modalities(),
        kinds=models.kinds(),
    )
    body = health.model_dump(exclude_none=True)
    return JSONResponse(body, 200 if health.status == "ok" else 503)


@router.post("/v1/chat", response_model=ChatResponse, responses=ERROR_RESPONSES, tags=["chat"])
async def chat(body: ChatRequest, models: ModelsDep, request: Request) -> ChatResponse:
    chat = await load_media(request, serving.chat_request(body, request_id(request)))
    handle = await submit(models, chat)
    return await answer(request, serving.CHAT, handle, body, stream=False)


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
    body: ChatRequest, models: ModelsDep, request: Request
) -> EventSourceResponse:
    chat = await load_media(request, serving.chat_request(body, request_id(request)))
    handle = await submit(models, chat)
    return await answer(request, serving.CHAT, handle, body, stream=True)
