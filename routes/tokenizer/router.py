"""The tokenizer routes: /tokenize, /detokenize, /apply-template (vLLM's and llama-server's
names; ``vllm bench serve`` calls the first two)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from backends.core.request import ChatPrompt, GenerationRequest, Prompt, TextPrompt
from routes.door.convert import chat_prompt
from routes.door.fields import client_names, door_names
from routes.door.media import load_media
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from schemas.tokenizer import (
    ApplyTemplateRequest,
    ApplyTemplateResponse,
    ChatInput,
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeRequest,
    TokenizeResponse,
)

router = APIRouter(tags=["tokenizer"])


def _chat(body: ChatInput) -> ChatPrompt:
    assert body.messages is not None
    return chat_prompt(body.messages, body.tools, body.chat_template_kwargs)


async def _loaded(request: Request, prompt: Prompt, model: str | None) -> Prompt:
    """The prompt with its images loaded (they count as the model's image tokens)."""
    return (await load_media(request, GenerationRequest(prompt, model=model))).prompts[0]


@router.post("/tokenize", response_model=TokenizeResponse, responses=ERROR_RESPONSES)
async def tokenize(body: TokenizeRequest, models: ModelsDep, request: Request) -> TokenizeResponse:
    """Token ids of raw text, or of a chat after the model's template (an image as its image
    tokens)."""
    prompt = TextPrompt(body.prompt) if body.prompt is not None else _chat(body)
    loaded = await _loaded(request, prompt, body.model)
    with client_names(door_names(loaded)):
        prepared = await models.tokenize(loaded, body.model)
    return TokenizeResponse(
        count=len(prepared),
        max_model_len=models.get(body.model).max_length,
        tokens=prepared.token_ids,
    )


@router.post("/detokenize", response_model=DetokenizeResponse, responses=ERROR_RESPONSES)
async def detokenize(body: DetokenizeRequest, models: ModelsDep) -> DetokenizeResponse:
    return DetokenizeResponse(prompt=await models.detokenize(body.tokens, body.model))


@router.post("/apply-template", response_model=ApplyTemplateResponse, responses=ERROR_RESPONSES)
async def apply_template(
    body: ApplyTemplateRequest, models: ModelsDep, request: Request
) -> ApplyTemplateResponse:
    """A chat rendered with the model's template, as the model would get it."""
    prompt = await _loaded(request, _chat(body), body.model)
    with client_names(door_names(prompt)):
        prepared = await models.tokenize(prompt, body.model)
    return ApplyTemplateResponse(prompt=prepared.text)
