"""The seed's raw-completion route: POST /generate."""

from __future__ import annotations

from fastapi import APIRouter

from metrics.timing import RequestTimer
from routes.deps import ServiceDep
from routes.openai import ERRORS
from routes.openai_serving import openai_finish_reason
from schemas.generate import GenerateRequest, GenerateResponse

router = APIRouter(tags=["generate"])


@router.post("/generate", response_model=GenerateResponse, responses=ERRORS)
async def generate(body: GenerateRequest, service: ServiceDep) -> GenerateResponse:
    timer = RequestTimer()
    prompt = await service.prepare_text(body.prompt)
    params = service.plan(prompt, max_tokens=body.max_new_tokens, temperature=body.temperature)
    result = await service.complete(service.generate(prompt, params, timer))
    return GenerateResponse(
        generated_text=result.text,
        tokens_generated=result.finish.usage.completion_tokens,
        finish_reason=openai_finish_reason(result.finish.reason),
    )
