"""Ollama's /api/chat and /api/generate over the core, free of FastAPI: bodies →
GenerationRequest, and a request handle's pieces → Ollama's JSON lines, whose fold is the whole
response (so the two can never disagree). Its errors: routes/ollama/errors.py.

A piece of thinking or answer text is one line as soon as it is made; a tool call is one line
once it is whole (Ollama sends each call with its arguments as an object). The last line says
``done: true`` with the counts and durations.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from backends.core.handle import RequestHandle
from backends.core.request import ChatPrompt, GenerationRequest, Prompt, TextPrompt
from backends.errors import GenerationFailed, InvalidRequest
from backends.types import ChoiceFinish, GeneratedToken, ImageSource
from routes.door.answer import Door, Lines
from routes.door.blocks import BlockEvent, Closed, OutputBlocks
from routes.door.convert import (
    failed_calls,
    finish_reason,
    sampling_params,
    totals,
    unset_sampling,
)
from routes.ollama.errors import error_line
from schemas.common import FailedToolCall
from schemas.ollama import (
    AssistantMessage,
    CalledFunction,
    ChatRequest,
    DoneReason,
    Durations,
    GenerateFields,
    GenerateRequest,
    Logprob,
    Message,
    OllamaChatResponse,
    OllamaGenerateResponse,
    TokenLogprob,
    ToolCall,
)

# This door's names for the core's fields, where they differ (for errors).
FIELDS = {
    "max_tokens": "options.num_predict",
    "guidance": "format",
    "top_k": "options.top_k",
    "min_p": "options.min_p",
    "speculative": "options.speculative",
}


def created_at() -> str:
    """Now, as Ollama writes it: RFC 3339 in UTC."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


# ---- requests ----------------------------------------------------------------------------------
def check(body: GenerateFields, *, max_length: int | None, thinks: bool) -> None:
    """What only the chosen model can tell: ``num_ctx`` within its context, and ``think`` on a
    model that thinks (Ollama refuses it otherwise, too)."""
    num_ctx = body.opts.num_ctx
    if num_ctx is not None and max_length is not None and num_ctx > max_length:
        raise InvalidRequest(
            f"options.num_ctx ({num_ctx}) is more than the {max_length} tokens "
            f"{body.model!r} holds.",
            param="options.num_ctx",
        )
    if body.think and not thinks:
        raise InvalidRequest(f"{body.model!r} does not support thinking.", param="think")


def _request(
    body: GenerateFields, prompt: Prompt, request_id: str, tool_choice: str = "none"
) -> GenerationRequest:
    opts = body.opts
    logprobs = body.logprobs
    return GenerationRequest(
        prompt,
        sampling_params(
            opts.sampling_fields(),
            logprobs=logprobs,
            top_logprobs=body.top_logprobs if logprobs else 0,
            json_schema=body.json_schema,
        ),
        unset=unset_sampling(opts, {"repetition_penalty": "repeat_penalty"}),
        max_tokens=opts.max_tokens,
        stop=opts.stop or (),
        model=body.model,
        request_id=request_id,
        tool_choice=tool_choice,
        split_reasoning=True,
    )


def _image(param: str, data: str) -> ImageSource:
    """An Ollama image: base64 bytes (no prefix), or a data: URL."""
    if data.startswith("data:"):
        return ImageSource(param, url=data)
    return ImageSource(param, b64=data)


def chat_request(body: ChatRequest, request_id: str) -> GenerationRequest:
    """The chat; its messages' images become the prompt's image sources, in order, named by
    where the client put them (``messages.0.images.1``), for the door to load."""
    images = [
        _image(f"messages.{i}.images.{j}", data)
        for i, m in enumerate(body.messages)
        for j, data in enumerate(m.images or ())
    ]
    prompt = ChatPrompt(
        [m.as_template_message() for m in body.messages],
        [t.model_dump(exclude_none=True) for t in body.tools] if body.tools else None,
        body.template_args,
        images,
    )
    return _request(body, prompt, request_id, body.tool_choice)


def generate_request(body: GenerateRequest, request_id: str) -> GenerationRequest:
    if body.raw:
        return _request(body, TextPrompt(body.prompt), request_id)
    system = [{"role": "system", "content": body.system}] if body.system else []
    user = Message(role="user", content=body.prompt, images=body.images)
    messages = [*system, user.as_template_message()]
    images = [_image(f"images.{j}", d) for j, d in enumerate(body.images or ())]
    return _request(body, ChatPrompt(messages, None, body.template_args, images), request_id)


# ---- what the handle reports -------------------------------------------------------------------
def _ns(seconds: float) -> int:
    return max(int(seconds * 1e9), 0)


def durations(handle: RequestHandle) -> Durations:
    """The counts and durations of the last line (see :class:`Durations`): each from the
    core's timing, and together never more than the total."""
    m = handle.metrics()
    count = totals(handle.usage())
    total = _ns(m.total_latency)
    waited = min(_ns(handle.queue_time()), _ns(m.ttft))
    prompt_eval = _ns(m.ttft) - waited
    decoding = m.tpot * (m.output_tokens - 1) if m.output_tokens > 1 else 0.0
    return Durations(
        total_duration=total,
        load_duration=waited,
        prompt_eval_count=count.prompt,
        prompt_eval_duration=prompt_eval,
        eval_count=count.completion,
        eval_duration=min(_ns(decoding), max(total - waited - prompt_eval, 0)),
    )


def _token_logprob(token: str, logprob: float) -> TokenLogprob:
    return TokenLogprob(token=token, logprob=logprob, bytes=list(token.encode()))


def logprobs(tokens: Sequence[GeneratedToken]) -> list[Logprob]:
    out = []
    for t in tokens:
        if t.logprob is None:
            raise GenerationFailed("logprobs were requested but the backend did not report them")
        tops = [_token_logprob(alt.token, alt.logprob) for alt in t.top_logprobs]
        chosen = _token_logprob(t.logprob.token, t.logprob.logprob)
        out.append(Logprob(**chosen.model_dump(), top_logprobs=tops or None))
    return out


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        value = None
    if not isinstance(value, dict):  # the core's parsers pass on only whole JSON objects
        raise GenerationFailed(f"A tool call's arguments are not a JSON object: {text!r}")
    return value


@dataclass(frozen=True)
class Part:
    """What one line adds: answer text, thinking, whole tool calls, log-probabilities."""

    text: str = ""
    thinking: str = ""
    calls: tuple[ToolCall, ...] = ()
    logprobs: tuple[Logprob, ...] = ()


@dataclass(frozen=True)
class End:
    done_reason: DoneReason
    durations: Durations
    failed_calls: list[FailedToolCall] | None = None  # calls a grammar held, cut by the end


async def parts(handle: RequestHandle, body: GenerateFields) -> AsyncIterator[Part | End]:
    """The lines' contents: text and thinking as they come, a call once its block closes
    (the output-blocks machine every door shares), then the end."""
    blocks = OutputBlocks()
    made = 0  # tool calls so far
    finish: ChoiceFinish = "stop"
    failed: list[FailedToolCall] | None = None

    def whole_calls(events: list[BlockEvent]) -> tuple[ToolCall, ...]:
        nonlocal made
        calls = []
        for event in events:
            if isinstance(event, Closed) and event.block.kind == "call":
                block = event.block
                function = CalledFunction(
                    index=made, name=block.name, arguments=_arguments(event.text)
                )
                calls.append(ToolCall(id=block.call_id, function=function))
                made += 1
        return tuple(calls)

    async for piece in handle:
        calls = whole_calls(blocks.feed(piece))
        probs = tuple(logprobs(piece.tokens)) if body.logprobs and piece.tokens else ()
        if piece.text or piece.reasoning or calls or probs:
            yield Part(piece.text, piece.reasoning, calls, probs)
        if piece.finish_reason is not None:
            finish = piece.finish_reason
            failed = failed_calls(piece.failed_calls)
    calls = whole_calls(blocks.end())
    if calls:
        yield Part(calls=calls)
    reason = finish_reason(finish)
    yield End("length" if reason == "length" else "stop", durations(handle), failed)


# ---- /api/chat ---------------------------------------------------------------------------------
async def chat_lines(handle: RequestHandle, body: ChatRequest) -> AsyncIterator[OllamaChatResponse]:
    async for part in parts(handle, body):
        if isinstance(part, End):
            yield OllamaChatResponse(
                model=handle.model,
                created_at=created_at(),
                message=AssistantMessage(),
                done=True,
                done_reason=part.done_reason,
                failed_tool_calls=part.failed_calls,
                **part.durations.model_dump(),
            )
            continue
        message = AssistantMessage(
            content=part.text, thinking=part.thinking or None, tool_calls=list(part.calls) or None
        )
        yield OllamaChatResponse(
            model=handle.model,
            created_at=created_at(),
            message=message,
            done=False,
            logprobs=list(part.logprobs) or None,
        )


async def chat_response(handle: RequestHandle, body: ChatRequest) -> OllamaChatResponse:
    """The whole answer: the stream's lines, folded as a client folds them."""
    text, thinking, calls, probs = [], [], [], []
    last: OllamaChatResponse | None = None
    async for line in chat_lines(handle, body):
        text.append(line.message.content)
        thinking.append(line.message.thinking or "")
        calls += line.message.tool_calls or []
        probs += line.logprobs or []
        last = line
    assert last is not None and last.done
    message = AssistantMessage(
        content="".join(text), thinking="".join(thinking) or None, tool_calls=calls or None
    )
    return last.model_copy(update={"message": message, "logprobs": probs or None})


def loaded_chat(model: str) -> OllamaChatResponse:
    """The answer to a chat with no messages: Ollama's way to load a model (it is loaded)."""
    return OllamaChatResponse(
        model=model,
        created_at=created_at(),
        message=AssistantMessage(),
        done=True,
        done_reason="load",
    )


# ---- /api/generate -----------------------------------------------------------------------------
async def generate_lines(
    handle: RequestHandle, body: GenerateRequest
) -> AsyncIterator[OllamaGenerateResponse]:
    async for part in parts(handle, body):
        if isinstance(part, End):
            yield OllamaGenerateResponse(
                model=handle.model,
                created_at=created_at(),
                response="",
                done=True,
                done_reason=part.done_reason,
                **part.durations.model_dump(),
            )
            continue
        yield OllamaGenerateResponse(
            model=handle.model,
            created_at=created_at(),
            response=part.text,
            thinking=part.thinking or None,
            done=False,
            logprobs=list(part.logprobs) or None,
        )


async def generate_response(handle: RequestHandle, body: GenerateRequest) -> OllamaGenerateResponse:
    text, thinking, probs = [], [], []
    last: OllamaGenerateResponse | None = None
    async for line in generate_lines(handle, body):
        text.append(line.response)
        thinking.append(line.thinking or "")
        probs += line.logprobs or []
        last = line
    assert last is not None and last.done
    update = {"response": "".join(text), "thinking": "".join(thinking) or None}
    return last.model_copy(update={**update, "logprobs": probs or None})


def loaded_generate(model: str) -> OllamaGenerateResponse:
    return OllamaGenerateResponse(
        model=model, created_at=created_at(), response="", done=True, done_reason="load"
    )


# ---- the doors ---------------------------------------------------------------------------------
async def _json(
    lines: AsyncIterator[OllamaChatResponse | OllamaGenerateResponse],
) -> AsyncIterator[str]:
    async for line in lines:
        yield line.model_dump_json(exclude_none=True)


def chat_stream(handle: RequestHandle, body: ChatRequest) -> Lines:
    return Lines(_json(chat_lines(handle, body)), error_line)


def generate_stream(handle: RequestHandle, body: GenerateRequest) -> Lines:
    return Lines(_json(generate_lines(handle, body)), error_line)


CHAT = Door(whole=chat_response, stream=chat_stream)
GENERATE = Door(whole=generate_response, stream=generate_stream)
