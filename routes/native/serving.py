"""The native API over the core, free of FastAPI: the seed's /v1/chat, /v1/chat/stream and
/generate bodies → GenerationRequest, and a request handle → their answers.

/v1/chat answers with the text and the request's timing; its stream sends each piece of text as
it is decoded, then the timing; /generate continues a raw prompt, as the original
OnnxTextGenerator server did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from backends.core.handle import RequestHandle
from backends.core.request import GenerationRequest, TextPrompt
from routes.door.answer import Door, Stream
from routes.door.convert import (
    chat_prompt,
    finish_reason,
    sampling_params,
    timing,
    unset_sampling,
)
from schemas.generate import GenerateRequest, GenerateResponse
from schemas.native import ChatRequest, ChatResponse, StreamDone, StreamToken


# ---- /v1/chat and /v1/chat/stream --------------------------------------------------------------
def chat_request(body: ChatRequest, request_id: str) -> GenerationRequest:
    return GenerationRequest(
        chat_prompt(body.messages),
        sampling_params(body),
        unset=unset_sampling(body),
        max_tokens=body.max_tokens,
        stop=body.stop_list,
        model=body.model,
        request_id=request_id,
    )


async def chat_response(handle: RequestHandle, body: ChatRequest) -> ChatResponse:
    result = await handle.result()
    [choice] = result.choices
    return ChatResponse(content=choice.text, metrics=timing(result.metrics, handle.model))


async def _chat_payloads(handle: RequestHandle) -> AsyncIterator[str]:
    async for piece in handle:
        if piece.text:
            yield StreamToken(token=piece.text).model_dump_json()
    yield StreamDone(metrics=timing(handle.metrics(), handle.model)).model_dump_json()


def chat_stream(handle: RequestHandle, body: ChatRequest) -> Stream:
    """``data: {"token": ...}`` per piece of text, then ``data: {"done": true, ...}``."""
    return Stream(_chat_payloads(handle))


CHAT = Door(whole=chat_response, stream=chat_stream)


# ---- /generate ---------------------------------------------------------------------------------
GENERATE_FIELDS = {"max_tokens": "max_new_tokens"}  # this door's names for the core's fields


def generate_request(body: GenerateRequest, request_id: str) -> GenerationRequest:
    return GenerationRequest(
        TextPrompt(body.prompt),
        sampling_params(body),
        unset=unset_sampling(body),
        max_tokens=body.max_new_tokens,
        stop=body.stop_list,
        model=body.model,
        request_id=request_id,
    )


async def generate_response(handle: RequestHandle, body: GenerateRequest) -> GenerateResponse:
    [choice] = (await handle.result()).choices
    return GenerateResponse(
        generated_text=choice.text,
        tokens_generated=choice.completion_tokens,
        finish_reason=finish_reason(choice.finish_reason),
    )


GENERATE = Door(whole=generate_response)
