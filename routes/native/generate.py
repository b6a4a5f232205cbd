"""The raw-completion route of the original OnnxTextGenerator server: POST /generate."""

from __future__ import annotations

from fastapi import APIRouter, Request

from backends.core.request import GenerationRequest, TextPrompt
from routes.door.convert import sampling_params
from routes.http.cancellation import unless_disconnected
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from schemas.generate import GenerateRequest, GenerateResponse

router = APIRouter(tags=["generate"])


@router.post("/generate", response_model=GenerateResponse, responses=ERROR_RESPONSES)
async def generate(body: GenerateRequest, models: ModelsDep, request: Request) -> GenerateResponse:
    core = GenerationRequest(
        TextPrompt(body.prompt),
        sampling_params(body),
        max_tokens=body.max_new_tokens,
        stop=body.stop_list,
        model=body.model,
        request_id=request_id(request),
        param_names={"max_tokens": "max_new_tokens"},
    )
    handle = await models.submit(core)
    [choice] = (await unless_disconnected(request, handle.result())).choices
    return GenerateResponse(
        generated_text=choice.text,
        tokens_generated=choice.completion_tokens,
        # "cancelled" is the door's own doing: its client has gone and reads nothing more.
        finish_reason="stop" if choice.finish_reason == "cancelled" else choice.finish_reason,
    )
