"""The raw-completion route of the original OnnxTextGenerator server: POST /generate.

Thin: the logic lives in routes/native/serving.py."""

from __future__ import annotations

from fastapi import APIRouter, Request

from routes.door.answer import answer
from routes.door.fields import submit
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from routes.native import serving
from schemas.generate import GenerateRequest, GenerateResponse

router = APIRouter(tags=["generate"])


@router.post("/generate", response_model=GenerateResponse, responses=ERROR_RESPONSES)
async def generate(body: GenerateRequest, models: ModelsDep, request: Request) -> GenerateResponse:
    generation = serving.generate_request(body, request_id(request))
    handle = await submit(models, generation, serving.GENERATE_FIELDS)
    return await answer(request, serving.GENERATE, handle, body, stream=False)
