"""OpenAI-compatible routes: /v1/chat/completions, /v1/completions, /v1/models, and vLLM's
render routes beside the first two (a request's token ids, nothing generated).

Thin: validate, start the generations (errors here still get their status code), then answer
JSON or SSE. The logic lives in routes/openai/serving.py.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from sse_starlette import EventSourceResponse

from routes.door.answer import answer
from routes.door.fields import render, submit
from routes.door.media import load_media
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from routes.http.sse import sse_response_doc
from routes.openai import serving
from schemas.openai import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Completion,
    CompletionRequest,
    ModelCard,
    ModelList,
    RenderedPrompt,
)

router = APIRouter(prefix="/v1", tags=["openai"])


def _with_stream(chunk: type[BaseModel], what: str) -> dict[int | str, dict[str, Any]]:
    stream = sse_response_doc(
        f"{what}. With `stream: true`: server-sent events, each `data: <{chunk.__name__}>` "
        "(see components/schemas), ended by `data: [DONE]`. An error after the stream started "
        'arrives as `data: {"error": {...}}` and ends the stream.',
        chunk,
        done=True,
    )
    return {200: stream, **ERROR_RESPONSES}


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    responses=_with_stream(ChatCompletionChunk, "A chat completion"),
    summary="Chat completion (OpenAI)",
)
async def chat_completions(
    body: ChatCompletionRequest, models: ModelsDep, request: Request
) -> ChatCompletion | EventSourceResponse:
    chat = await load_media(request, serving.chat_request(body, request_id(request)))
    handle = await submit(models, chat, serving.chat_fields(body))
    return await answer(request, serving.CHAT, handle, body, stream=body.stream)


@router.post(
    "/completions",
    response_model=Completion,
    responses=_with_stream(Completion, "A text completion (no chat template)"),
    summary="Text completion (OpenAI)",
)
async def completions(
    body: CompletionRequest, models: ModelsDep, request: Request
) -> Completion | EventSourceResponse:
    handle = await submit(models, serving.completion_request(body, request_id(request)))
    return await answer(request, serving.COMPLETIONS, handle, body, stream=body.stream)


@router.post(
    "/chat/completions/render",
    response_model=RenderedPrompt,
    responses=ERROR_RESPONSES,
    summary="A chat completion request's token ids (vLLM's render)",
)
async def render_chat_completion(
    body: ChatCompletionRequest, models: ModelsDep, request: Request
) -> RenderedPrompt:
    """The token ids ``/v1/chat/completions`` would feed the model for this body (template,
    tools and images applied); nothing is generated. The inference gateway's endpoint picker
    tokenizes with it for prefix-aware routing."""
    chat = await load_media(request, serving.chat_request(body, request_id(request)))
    [prompt] = await render(models, chat, serving.chat_fields(body))
    return serving.rendered(prompt)


@router.post(
    "/completions/render",
    response_model=list[RenderedPrompt],
    responses=ERROR_RESPONSES,
    summary="A completion request's token ids, one entry per prompt (vLLM's render)",
)
async def render_completion(
    body: CompletionRequest, models: ModelsDep, request: Request
) -> list[RenderedPrompt]:
    """The token ids ``/v1/completions`` would feed the model, for each prompt of this body;
    nothing is generated."""
    prompts = await render(models, serving.completion_request(body, request_id(request)))
    return [serving.rendered(prompt) for prompt in prompts]


@router.get("/models", response_model=ModelList, responses={401: ERROR_RESPONSES[401]})
async def list_models(models: ModelsDep) -> ModelList:
    """Every model and adapter, each saying whether it is in memory (``loaded``)."""
    listed = serving.model_list(models)
    return ModelList(data=[_with_residency(card, models) for card in listed.data])


@router.get("/models/{model_id}", response_model=ModelCard, responses=ERROR_RESPONSES)
async def get_model(model_id: str, models: ModelsDep) -> ModelCard:
    return _with_residency(serving.model_card(models.served_model(model_id)), models)


def _with_residency(card: ModelCard, models: ModelsDep) -> ModelCard:
    loaded = models.is_loaded(models.served_model(card.id).service.model_name)
    return card.model_copy(update={"loaded": loaded})
