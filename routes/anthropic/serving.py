"""Anthropic's Messages protocol over the core, free of FastAPI: bodies → GenerationRequest, a
request handle's pieces → Messages stream events, and those events folded into the whole
message (so the two can never disagree). Errors in the one shape → Anthropic's shape.

Content blocks map onto what chat templates take, as OpenAI's chat does: an assistant turn's
``tool_use`` blocks become its ``tool_calls`` (the input as an object), each ``tool_result``
a ``tool`` message, ``system`` the first message.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from backends.core.handle import ChoiceDelta, RequestHandle
from backends.core.request import ChatPrompt, GenerationRequest
from backends.errors import GenerationFailed
from backends.types import ChoiceFinish, SamplingParams
from routes.door.convert import timing
from schemas.anthropic import (
    AnthropicErrorDetail,
    AnthropicErrorResponse,
    AnthropicErrorType,
    ContentBlock,
    ContentBlockDeltaEvent,
    ContentBlockStartEvent,
    ContentBlockStopEvent,
    CountTokensRequest,
    InputJsonDelta,
    Message,
    MessageDelta,
    MessageDeltaEvent,
    MessageDeltaUsage,
    MessageParam,
    MessagesInput,
    MessagesRequest,
    MessageStartEvent,
    MessageStopEvent,
    PingEvent,
    StopReason,
    StreamEvent,
    TextBlock,
    TextBlockParam,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolResultBlockParam,
    ToolUseBlock,
    ToolUseBlockParam,
    Usage,
)


# ---- requests ----------------------------------------------------------------------------------
def _text(blocks: list[TextBlockParam]) -> str:
    return "\n".join(b.text for b in blocks)


def _tool_message(block: ToolResultBlockParam) -> dict[str, Any]:
    text = _text(block.content)
    if block.is_error:  # templates have no field for it: the model reads it
        text = f"Error: {text}" if text else "Error"
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": text}


def _turn(message: MessageParam) -> list[dict[str, Any]]:
    """One Anthropic message as chat-template messages (a user turn's tool results become
    ``tool`` messages, in their order; thinking from earlier turns is not shown)."""
    if message.role == "assistant":
        text = _text([b for b in message.content if isinstance(b, TextBlockParam)])
        calls = [
            {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": b.input}}
            for b in message.content
            if isinstance(b, ToolUseBlockParam)
        ]
        if not calls:
            return [{"role": "assistant", "content": text}]
        return [{"role": "assistant", "content": text or None, "tool_calls": calls}]
    out: list[dict[str, Any]] = []
    texts: list[TextBlockParam] = []
    for block in message.content:
        if isinstance(block, TextBlockParam):
            texts.append(block)
        elif isinstance(block, ToolResultBlockParam):
            if texts:
                out.append({"role": message.role, "content": _text(texts)})
                texts = []
            out.append(_tool_message(block))
    if texts or not out:
        out.append({"role": message.role, "content": _text(texts)})
    return out


def template_messages(body: MessagesInput) -> list[dict[str, Any]]:
    system = _text(body.system) if body.system else ""
    messages = [{"role": "system", "content": system}] if system else []
    for message in body.messages:
        messages += _turn(message)
    return messages


def template_tools(body: MessagesInput) -> list[dict[str, Any]] | None:
    """Anthropic's tools in the shape chat templates (and the core's tool parsers) take."""
    if not body.tools:
        return None
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                **({"description": t.description} if t.description is not None else {}),
                "parameters": t.input_schema,
            },
        }
        for t in body.tools
    ]


def chat(body: MessagesInput) -> ChatPrompt:
    return ChatPrompt(template_messages(body), template_tools(body), body.template_args)


def messages_request(body: MessagesRequest, request_id: str) -> GenerationRequest:
    sampling = SamplingParams(
        temperature=body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        top_k=body.top_k or 0,
        seed=body.seed,
    )
    return GenerationRequest(
        chat(body),
        sampling,
        max_tokens=body.max_tokens,
        stop=body.stop_sequences or (),
        model=body.model,
        request_id=request_id,
        tool_choice=body.tool_choice_name,
        parallel_tool_calls=body.parallel_tool_calls,
        split_reasoning=True,
    )


def count_prompt(body: CountTokensRequest) -> ChatPrompt:
    """The prompt a generation would get: with ``tool_choice: none`` the tools are not shown,
    as the core does when generating (a forced choice changes the decoding, not the prompt)."""
    prompt = chat(body)
    if body.tool_choice_name == "none":
        return ChatPrompt(prompt.messages, None, prompt.template_args)
    return prompt


# ---- stream events -----------------------------------------------------------------------------
def tool_use_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def stop_reason(finish: ChoiceFinish, stop_sequence: str | None) -> StopReason:
    if finish == "tool_calls":
        return "tool_use"
    if stop_sequence is not None:
        return "stop_sequence"
    # "cancelled" is the door's own doing: its client has gone and reads nothing more.
    return "max_tokens" if finish == "length" else "end_turn"


class _Blocks:
    """The content blocks of one message as its pieces arrive: thinking, text and each tool
    call get a block of their own, opened when their kind of output starts and closed when
    another starts (or at the end)."""

    def __init__(self, omit_thinking: bool) -> None:
        self.omit_thinking = omit_thinking
        self.index = -1  # the last block opened
        self.open: str | None = None  # its type, while it is open
        self.call_blocks: dict[int, int] = {}  # a tool call's index → its block

    def _start(self, block: ContentBlock) -> list[StreamEvent]:
        events = self.close()
        self.index += 1
        self.open = block.type
        return [*events, ContentBlockStartEvent(index=self.index, content_block=block)]

    def close(self) -> list[StreamEvent]:
        if self.open is None:
            return []
        self.open = None
        return [ContentBlockStopEvent(index=self.index)]

    def feed(self, piece: ChoiceDelta) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if piece.reasoning:
            if self.open != "thinking":
                events += self._start(ThinkingBlock(thinking=""))
            if not self.omit_thinking:
                thought = ThinkingDelta(thinking=piece.reasoning)
                events.append(ContentBlockDeltaEvent(index=self.index, delta=thought))
        if piece.text:
            if self.open != "text":
                events += self._start(TextBlock(text=""))
            events.append(
                ContentBlockDeltaEvent(index=self.index, delta=TextDelta(text=piece.text))
            )
        for call in piece.calls:
            if call.id is not None:
                block = ToolUseBlock(id=tool_use_id(call.id), name=call.name or "", input={})
                events += self._start(block)
                self.call_blocks[call.index] = self.index
            if call.arguments:
                part = InputJsonDelta(partial_json=call.arguments)
                events.append(
                    ContentBlockDeltaEvent(index=self.call_blocks[call.index], delta=part)
                )
        return events


def _message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


async def message_events(
    handle: RequestHandle, body: MessagesRequest
) -> AsyncIterator[StreamEvent]:
    """The Messages stream: ``message_start`` and a ``ping``, the content blocks, then
    ``message_delta`` (stop reason, final usage, ``metrics``) and ``message_stop``."""
    start = Usage(input_tokens=handle.prompt_tokens, output_tokens=0)
    message = Message(id=_message_id(), model=handle.model, content=[], usage=start)
    yield MessageStartEvent(message=message)
    yield PingEvent()
    blocks = _Blocks(omit_thinking=body.thinking_omitted)
    finish: ChoiceFinish = "stop"
    stop_sequence: str | None = None
    async for piece in handle:
        for event in blocks.feed(piece):
            yield event
        if piece.finish_reason is not None:
            finish, stop_sequence = piece.finish_reason, piece.stop_sequence
    for event in blocks.close():
        yield event
    usage = handle.usage()
    reason = stop_reason(finish, stop_sequence)
    yield MessageDeltaEvent(
        delta=MessageDelta(
            stop_reason=reason, stop_sequence=stop_sequence if reason == "stop_sequence" else None
        ),
        usage=MessageDeltaUsage(
            output_tokens=usage.completion_tokens,
            input_tokens=usage.prompt_tokens - usage.cached_tokens,
            cache_read_input_tokens=usage.cached_tokens,
        ),
        metrics=timing(handle.metrics(), handle.model),
    )
    yield MessageStopEvent()


async def stream_payloads(
    handle: RequestHandle, body: MessagesRequest
) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` pairs: Anthropic's stream names every event (``event: <type>``)."""
    async for event in message_events(handle, body):
        yield event.type, event.model_dump_json()


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        value = None
    if not isinstance(value, dict):  # the core's parsers pass on only whole JSON objects
        raise GenerationFailed(f"A tool call's arguments are not a JSON object: {arguments!r}")
    return value


async def message_response(handle: RequestHandle, body: MessagesRequest) -> Message:
    """The whole message: the stream's events, folded as a client folds them."""
    message: Message | None = None
    arguments: dict[int, list[str]] = {}
    async for event in message_events(handle, body):
        if isinstance(event, MessageStartEvent):
            message = event.message
            continue
        assert message is not None
        if isinstance(event, ContentBlockStartEvent):
            message.content.append(event.content_block.model_copy())
        elif isinstance(event, ContentBlockDeltaEvent):
            block, delta = message.content[event.index], event.delta
            if isinstance(block, TextBlock) and isinstance(delta, TextDelta):
                block.text += delta.text
            elif isinstance(block, ThinkingBlock) and isinstance(delta, ThinkingDelta):
                block.thinking += delta.thinking
            elif isinstance(delta, InputJsonDelta):
                arguments.setdefault(event.index, []).append(delta.partial_json)
        elif isinstance(event, ContentBlockStopEvent):
            block = message.content[event.index]
            if isinstance(block, ToolUseBlock):
                block.input = _tool_input("".join(arguments.get(event.index, [])))
        elif isinstance(event, MessageDeltaEvent):
            message.stop_reason = event.delta.stop_reason
            message.stop_sequence = event.delta.stop_sequence
            message.usage = Usage(**event.usage.model_dump())
            message.metrics = event.metrics
    assert message is not None
    return message


# ---- errors ------------------------------------------------------------------------------------
_ERROR_TYPES: dict[int, AnthropicErrorType] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",  # not ready, shutting down, cancelled by an operator
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> AnthropicErrorType:
    return _ERROR_TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")


def anthropic_error(
    status: int, body: Mapping[str, Any], request_id: str | None = None
) -> dict[str, Any]:
    """An error body in the one shape (OpenAI's, as every handler makes it) in Anthropic's:
    ``{"type": "error", "error": {"type", "message"}}``; the parameter, which Anthropic's shape
    has no field for, leads the message unless the message names it already."""
    detail = body.get("error")
    detail = detail if isinstance(detail, Mapping) else {}
    message = str(detail.get("message") or "Error.")
    param = detail.get("param")
    if param and str(param) not in message:
        message = f"{param}: {message}"
    error = AnthropicErrorDetail(type=error_type(status), message=message)
    return AnthropicErrorResponse(error=error, request_id=request_id).model_dump(exclude_none=True)


def error_event(status: int, body: dict[str, Any]) -> tuple[str, str]:
    """The ``error`` event that ends a stream that failed after it started."""
    return "error", json.dumps(anthropic_error(status, body))
