"""The tokenizer routes: /tokenize, /detokenize, /apply-template (vLLM's and llama-server's
names; ``vllm bench serve`` calls the first two)."""

from __future__ import annotations

from fastapi import APIRouter

from backends.core.request import ChatPrompt, TextPrompt
from routes.door.convert import chat_prompt
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


@router.post("/tokenize", response_model=TokenizeResponse, responses=ERROR_RESPONSES)
async def tokenize(body: TokenizeRequest, models: ModelsDep) -> TokenizeResponse:
    """Token ids of raw text, or of a chat after the model's template."""
    prompt = TextPrompt(body.prompt) if body.prompt is not None else _chat(body)
    prepared = await models.tokenize(prompt, body.model)
    return TokenizeResponse(
        count=len(prepared),
        max_model_len=models.get(body.model).max_length,
        tokens=prepared.token_ids,
    )


@router.post("/detokenize", response_model=DetokenizeResponse, responses=ERROR_RESPONSES)
async def detokenize(body: DetokenizeRequest, models: ModelsDep) -> DetokenizeResponse:
    return DetokenizeResponse(prompt=await models.detokenize(body.tokens, body.model))


@router.post("/apply-template", response_model=ApplyTemplateResponse, responses=ERROR_RESPONSES)
async def apply_template(body: ApplyTemplateRequest, models: ModelsDep) -> ApplyTemplateResponse:
    """A chat rendered with the model's template, as the model would get it."""
    return ApplyTemplateResponse(prompt=(await models.tokenize(_chat(body), body.model)).text)
