"""OpenAI's protocol over the core, free of FastAPI: bodies → GenerationRequest, and a request
handle's pieces → OpenAI's responses and stream chunks.

Stop strings, the ``n`` choices, seeds per choice and usage totals are the core's; this module
only renames and reshapes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic import BaseModel

from backends.core.handle import ChoiceDelta, ChoiceResult, RequestHandle
from backends.core.registry import ModelRegistry, ServedModel
from backends.core.request import GenerationRequest, TextPrompt, TokenPrompt
from backends.errors import GenerationFailed
from backends.types import GeneratedToken, Logprob, PreparedPrompt, Usage
from routes.door import ids
from routes.door.answer import Door, Stream
from routes.door.convert import (
    chat_prompt,
    failed_calls,
    finish_reason,
    sampling_params,
    timing,
    totals,
    unset_sampling,
)
from schemas.openai import (
    AssistantMessage,
    CalledFunction,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatDelta,
    ChatLogprobs,
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    CompletionTokensDetails,
    DeltaFunction,
    DeltaToolCall,
    ModelCard,
    ModelList,
    PromptTokensDetails,
    RenderedPrompt,
    TokenLogprob,
    ToolCallOut,
    TopLogprob,
    UsageInfo,
)

STARTED_AT = int(time.time())  # "created" of the served model


# ---- requests ----------------------------------------------------------------------------------
def chat_request(body: ChatCompletionRequest, request_id: str) -> GenerationRequest:
    return GenerationRequest(
        chat_prompt(body.messages, body.tools, body.template_args),
        sampling_params(
            body,
            logprobs=body.logprobs,
            top_logprobs=body.top_logprobs or 0,
            json_schema=body.json_schema,
            beams=body.beam_search,
        ),
        unset=unset_sampling(body),
        max_tokens=body.token_limit,
        stop=body.stop_list,
        n=body.n,
        model=body.model,
        request_id=request_id,
        tool_choice=body.tool_choice_name,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        split_reasoning=True,
    )


def chat_fields(body: ChatCompletionRequest) -> dict[str, str]:
    """This door's names for the core's fields, where they differ (for errors)."""
    return {"max_tokens": body.token_limit_name}


def completion_request(body: CompletionRequest, request_id: str) -> GenerationRequest:
    logprobs = body.logprobs is not None
    return GenerationRequest(
        [TextPrompt(p) if isinstance(p, str) else TokenPrompt(tuple(p)) for p in body.prompts],
        sampling_params(
            body, logprobs=logprobs, top_logprobs=body.logprobs or 0, beams=body.beam_search
        ),
        unset=unset_sampling(body),
        max_tokens=body.max_tokens,
        stop=body.stop_list,
        n=body.n,
        model=body.model,
        request_id=request_id,
    )


def rendered(prompt: PreparedPrompt) -> RenderedPrompt:
    return RenderedPrompt(token_ids=prompt.token_ids)


def usage_info(usage: Usage) -> UsageInfo:
    count = totals(usage)
    return UsageInfo(
        prompt_tokens=count.prompt,
        completion_tokens=count.completion,
        total_tokens=count.total,
        prompt_tokens_details=PromptTokensDetails(
            cached_tokens=count.cached, image_tokens=count.images or None
        ),
        completion_tokens_details=CompletionTokensDetails(
            drafted_tokens=count.drafted, accepted_tokens=count.accepted
        )
        if count.drafted
        else None,
    )


# ---- logprobs ----------------------------------------------------------------------------------
def _chosen(t: GeneratedToken) -> Logprob:
    if t.logprob is None:
        raise GenerationFailed("logprobs were requested but the backend did not report them")
    return t.logprob


def _top(entry: Logprob) -> TopLogprob:
    return TopLogprob(token=entry.token, logprob=entry.logprob, bytes=list(entry.token.encode()))


def chat_logprobs(tokens: Sequence[GeneratedToken]) -> ChatLogprobs:
    return ChatLogprobs(
        content=[
            TokenLogprob(
                **_top(_chosen(t)).model_dump(),
                top_logprobs=[_top(alt) for alt in t.top_logprobs],
            )
            for t in tokens
        ]
    )


def completion_logprobs(tokens: Sequence[GeneratedToken], top: int) -> CompletionLogprobs:
    return CompletionLogprobs(
        tokens=[_chosen(t).token for t in tokens],
        token_logprobs=[_chosen(t).logprob for t in tokens],
        top_logprobs=(
            [{alt.token: alt.logprob for alt in t.top_logprobs} for t in tokens] if top else None
        ),
        text_offset=[t.offset for t in tokens],
    )


# ---- whole responses ---------------------------------------------------------------------------
def assistant_message(c: ChoiceResult) -> AssistantMessage:
    calls = [
        ToolCallOut(id=t.id, function=CalledFunction(name=t.name, arguments=t.arguments))
        for t in c.tool_calls
    ]
    return AssistantMessage(
        content=c.text if c.text or not calls else None,
        reasoning_content=c.reasoning or None,
        tool_calls=calls or None,
    )


def delta_calls(piece: ChoiceDelta) -> list[DeltaToolCall] | None:
    calls = [
        DeltaToolCall(
            index=call.index,
            id=call.id,
            type="function" if call.id else None,
            function=DeltaFunction(
                name=call.name, arguments=call.arguments or ("" if call.id else None)
            ),
        )
        for call in piece.calls
    ]
    return calls or None


async def chat_response(handle: RequestHandle, body: ChatCompletionRequest) -> ChatCompletion:
    result = await handle.result()
    return ChatCompletion(
        id=ids.new_id(ids.CHAT_COMPLETION),
        created=handle.created,
        model=handle.model,
        choices=[
            ChatChoice(
                index=c.index,
                message=assistant_message(c),
                logprobs=chat_logprobs(c.tokens) if body.logprobs else None,
                finish_reason=finish_reason(c.finish_reason),
                failed_tool_calls=failed_calls(c.failed_calls),
            )
            for c in result.choices
        ],
        usage=usage_info(result.usage),
        metrics=timing(result.metrics, handle.model),
    )


async def completion_response(handle: RequestHandle, body: CompletionRequest) -> Completion:
    result = await handle.result()
    return Completion(
        id=ids.new_id(ids.COMPLETION),
        created=handle.created,
        model=handle.model,
        choices=[
            CompletionChoice(
                index=c.index,
                text=c.text,
                logprobs=(
                    completion_logprobs(c.tokens, body.logprobs)
                    if body.logprobs is not None
                    else None
                ),
                finish_reason=finish_reason(c.finish_reason),
            )
            for c in result.choices
        ],
        usage=usage_info(result.usage),
        metrics=timing(result.metrics, handle.model),
    )


# ---- streams -----------------------------------------------------------------------------------
async def chat_chunks(
    handle: RequestHandle, body: ChatCompletionRequest
) -> AsyncIterator[ChatCompletionChunk]:
    """OpenAI chat chunks: a role chunk per choice, content deltas, a finish chunk per choice
    (the last one carries ``metrics``), then the ``include_usage`` chunk if asked."""
    response_id = ids.new_id(ids.CHAT_COMPLETION)

    def chunk(choices: list[ChatChunkChoice], **extra: Any) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=response_id, created=handle.created, model=handle.model, choices=choices, **extra
        )

    for c in handle.choices:
        yield chunk([ChatChunkChoice(index=c.index, delta=ChatDelta(role="assistant", content=""))])
    async for piece in handle:
        logprobs = chat_logprobs(piece.tokens) if body.logprobs and piece.tokens else None
        calls = delta_calls(piece)
        if piece.text or piece.reasoning or calls or logprobs is not None:
            others = bool(piece.reasoning or calls)
            delta = ChatDelta(
                content=piece.text if piece.text or not others else None,
                reasoning_content=piece.reasoning or None,
                tool_calls=calls,
            )
            yield chunk([ChatChunkChoice(index=piece.index, delta=delta, logprobs=logprobs)])
        if piece.finish_reason is not None:
            done = ChatChunkChoice(
                index=piece.index,
                delta=ChatDelta(),
                finish_reason=finish_reason(piece.finish_reason),
                failed_tool_calls=failed_calls(piece.failed_calls),
            )
            last = piece.last and not body.include_usage
            yield chunk([done], metrics=timing(handle.metrics(), handle.model) if last else None)
    if body.include_usage:
        metrics = timing(handle.metrics(), handle.model)
        yield chunk([], usage=usage_info(handle.usage()), metrics=metrics)


async def completion_chunks(
    handle: RequestHandle, body: CompletionRequest
) -> AsyncIterator[Completion]:
    """Text-completion chunks; the finish of the last choice carries ``metrics``, then the
    ``include_usage`` chunk if asked."""
    response_id = ids.new_id(ids.COMPLETION)

    def chunk(choices: list[CompletionChoice], **extra: Any) -> Completion:
        return Completion(
            id=response_id, created=handle.created, model=handle.model, choices=choices, **extra
        )

    async for piece in handle:
        logprobs = (
            completion_logprobs(piece.tokens, body.logprobs)
            if body.logprobs is not None and piece.tokens
            else None
        )
        if piece.text or logprobs is not None or piece.finish_reason is not None:
            choice = CompletionChoice(
                index=piece.index,
                text=piece.text,
                logprobs=logprobs,
                finish_reason=finish_reason(piece.finish_reason) if piece.finish_reason else None,
            )
            last = piece.last and not body.include_usage
            yield chunk([choice], metrics=timing(handle.metrics(), handle.model) if last else None)
    if body.include_usage:
        metrics = timing(handle.metrics(), handle.model)
        yield chunk([], usage=usage_info(handle.usage()), metrics=metrics)


async def _payloads(chunks: AsyncIterator[BaseModel]) -> AsyncIterator[str]:
    """Each chunk as an event's ``data``, then OpenAI's ``data: [DONE]``."""
    async for chunk in chunks:
        yield chunk.model_dump_json()
    yield "[DONE]"


def chat_stream(handle: RequestHandle, body: ChatCompletionRequest) -> Stream:
    return Stream(_payloads(chat_chunks(handle, body)))


def completion_stream(handle: RequestHandle, body: CompletionRequest) -> Stream:
    return Stream(_payloads(completion_chunks(handle, body)))


CHAT = Door(whole=chat_response, stream=chat_stream)
COMPLETIONS = Door(whole=completion_response, stream=completion_stream)


# ---- models ------------------------------------------------------------------------------------
def model_list(models: ModelRegistry) -> ModelList:
    return ModelList(data=[model_card(m) for m in models.served()])


def model_card(model: ServedModel) -> ModelCard:
    length = model.max_length
    return ModelCard(
        id=model.id,
        created=STARTED_AT,
        parent=model.parent,
        root=str(model.service.model_dir),
        max_model_len=length,
        context_length=length,
        modalities=list(model.modalities) if model.modalities is not None else None,
        kind=model.kind,
    )
