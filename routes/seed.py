"""The seed API: /healthz, /v1/chat (JSON + metrics) and /v1/chat/stream (SSE)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from backends.service import Generation, InferenceService
from metrics.timing import RequestTimer
from routes.deps import ERROR_RESPONSES, ServiceDep
from schemas.chat import ChatMetrics, ChatRequest, ChatResponse, Health
from schemas.errors import error_body

router = APIRouter()

SSE_PING_SECONDS = 15


async def start_chat(service: InferenceService, body: ChatRequest) -> Generation:
    timer = RequestTimer()  # "accepted": the body parsed and validated
    service.check_model_name(body.model)
    prompt = await service.prepare_chat([m.model_dump() for m in body.messages])
    params = service.plan(
        prompt,
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
    )
    return service.generate(prompt, params, timer)


def chat_metrics(service: InferenceService, gen: Generation) -> ChatMetrics:
    return ChatMetrics(**gen.metrics().as_dict(), model=service.config.model_name)


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}}, tags=["health"])
async def healthz(service: ServiceDep) -> JSONResponse:
    health = Health(status=service.status, device=service.device, model_dir=str(service.model_dir))
    return JSONResponse(health.model_dump(), 200 if health.status == "ok" else 503)


@router.post("/v1/chat", response_model=ChatResponse, responses=ERROR_RESPONSES, tags=["chat"])
async def chat(body: ChatRequest, service: ServiceDep) -> ChatResponse:
    gen = await start_chat(service, body)
    result = await service.complete(gen)
    return ChatResponse(content=result.text, metrics=chat_metrics(service, gen))


async def _seed_events(service: InferenceService, gen: Generation) -> AsyncIterator[dict[str, str]]:
    try:
        async for event in gen:
            if event.text:
                yield {"data": json.dumps({"token": event.text})}
        assert gen.finish is not None
        if gen.finish.reason == "error":
            err = error_body(
                f"Generation failed: {gen.finish.error}", "server_error", code="generation_failed"
            )
            yield {"data": json.dumps(err)}
            return
        done = {"done": True, "token": "[DONE]", "metrics": chat_metrics(service, gen).model_dump()}
        yield {"data": json.dumps(done)}
    finally:
        gen.cancel()  # a client that went away stops its generation


@router.post(
    "/v1/chat/stream",
    responses=ERROR_RESPONSES,
    tags=["chat"],
    response_class=EventSourceResponse,
    description='Server-sent events: `data: {"token": ...}` per decoded piece, then '
    '`data: {"done": true, "token": "[DONE]", "metrics": {...}}`. An error after the stream '
    'started arrives as `data: {"error": {...}}` and ends the stream.',
)
async def chat_stream(body: ChatRequest, service: ServiceDep) -> EventSourceResponse:
    gen = await start_chat(service, body)
    return EventSourceResponse(_seed_events(service, gen), ping=SSE_PING_SECONDS)
