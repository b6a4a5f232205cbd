"""The seed's raw-completion route: POST /generate."""

from __future__ import annotations

from fastapi import APIRouter, Request

from backends.errors import RequestTimedOut
from metrics.timing import RequestTimer
from routes.cancellation import unless_disconnected
from routes.deps import ServiceDep
from routes.middleware import request_id
from routes.openai import ERRORS
from schemas.generate import GenerateRequest, GenerateResponse

router = APIRouter(tags=["generate"])


@router.post("/generate", response_model=GenerateResponse, responses=ERRORS)
async def generate(
    body: GenerateRequest, service: ServiceDep, request: Request
) -> GenerateResponse:
    timer = RequestTimer()
    service.check_admission()
    prompt = await service.prepare_text(body.prompt)
    params = service.plan(prompt, max_tokens=body.max_new_tokens, temperature=body.temperature)
    gen = service.generate(prompt, params, timer, request_id=request_id(request))
    result = await unless_disconnected(request, service.complete(gen))
    if result.finish.reason == "timeout":
        raise RequestTimedOut(
            f"The request exceeded GENAI_REQUEST_TIMEOUT after {result.metrics.output_tokens} "
            "tokens; nothing is returned rather than a silently cut answer."
        )
    return GenerateResponse(
        generated_text=result.text,
        tokens_generated=result.finish.usage.completion_tokens,
        finish_reason="length" if result.finish.reason == "length" else "stop",
    )
