"""The seed API: /healthz, /v1/chat (JSON + metrics) and /v1/chat/stream (SSE)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from backends.errors import RequestTimedOut
from backends.service import Generation, InferenceService
from metrics.timing import RequestTimer
from routes.cancellation import unless_disconnected
from routes.deps import ERROR_RESPONSES, ServiceDep, SettingsDep
from routes.middleware import request_id
from schemas.chat import ChatMetrics, ChatRequest, ChatResponse, Health
from schemas.errors import error_body

router = APIRouter()


async def start_chat(service: InferenceService, body: ChatRequest, rid: str) -> Generation:
    timer = RequestTimer()  # "accepted": the body parsed and validated
    service.check_model_name(body.model)
    service.check_admission()  # refuse early, before tokenizing, when full or draining
    prompt = await service.prepare_chat([m.model_dump() for m in body.messages])
    params = service.plan(
        prompt,
        max_tokens=body.max_tokens,
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
    )
    return service.generate(prompt, params, timer, request_id=rid)


def finish_error(gen: Generation) -> dict[str, object]:
    """The in-band error event for a stream that ended badly after it started."""
    assert gen.finish is not None
    if gen.finish.reason == "timeout":
        return error_body(
            "The request exceeded GENAI_REQUEST_TIMEOUT.", "timeout_error", code="request_timeout"
        )
    return error_body(
        f"Generation failed: {gen.finish.error}", "server_error", code="generation_failed"
    )


def chat_metrics(service: InferenceService, gen: Generation) -> ChatMetrics:
    return ChatMetrics(**gen.metrics().as_dict(), model=service.config.model_name)


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}}, tags=["health"])
async def healthz(service: ServiceDep) -> JSONResponse:
    health = Health(status=service.status, device=service.device, model_dir=str(service.model_dir))
    return JSONResponse(health.model_dump(), 200 if health.status == "ok" else 503)


@router.post("/v1/chat", response_model=ChatResponse, responses=ERROR_RESPONSES, tags=["chat"])
async def chat(body: ChatRequest, service: ServiceDep, request: Request) -> ChatResponse:
    gen = await start_chat(service, body, request_id(request))
    result = await unless_disconnected(request, service.complete(gen))
    if result.finish.reason == "timeout":
        raise RequestTimedOut(
            f"The request exceeded GENAI_REQUEST_TIMEOUT after {result.metrics.output_tokens} "
            "tokens; nothing is returned rather than a silently cut answer."
        )
    return ChatResponse(content=result.text, metrics=chat_metrics(service, gen))


async def _seed_events(service: InferenceService, gen: Generation) -> AsyncIterator[dict[str, str]]:
    try:
        async for event in gen:
            if event.text:
                yield {"data": json.dumps({"token": event.text})}
        assert gen.finish is not None
        if gen.finish.reason in ("error", "timeout"):
            yield {"data": json.dumps(finish_error(gen))}
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
async def chat_stream(
    body: ChatRequest, service: ServiceDep, settings: SettingsDep, request: Request
) -> EventSourceResponse:
    gen = await start_chat(service, body, request_id(request))
    return EventSourceResponse(_seed_events(service, gen), ping=settings.sse_ping)
