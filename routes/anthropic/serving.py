"""Anthropic's Messages protocol over the core, free of FastAPI: bodies → GenerationRequest, a
request handle's pieces → Messages stream events, and those events folded into the whole
message (so the two can never disagree). Its errors: routes/anthropic/errors.py.

Content blocks map onto what chat templates take, as OpenAI's chat does: an assistant turn's
``tool_use`` blocks become its ``tool_calls`` (the input as an object), each ``tool_result``
a ``tool`` message, ``system`` the first message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from backends.core.handle import RequestHandle
from backends.core.request import ChatPrompt, GenerationRequest
from backends.errors import GenerationFailed
from backends.types import ChoiceFinish, ImageSource
from routes.anthropic.errors import error_event
from routes.door import ids
from routes.door.answer import Door, Stream
from routes.door.blocks import Block, BlockEvent, Closed, Opened, OutputBlocks
from routes.door.convert import (
    Finish,
    failed_calls,
    finish_reason,
    sampling_params,
    timing,
    totals,
    unset_sampling,
)
from schemas.anthropic import (
    Base64ImageSource,
    ContentBlock,
    ContentBlockDeltaEvent,
    ContentBlockStartEvent,
    ContentBlockStopEvent,
    CountTokensRequest,
    ImageBlockParam,
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
from schemas.common import FailedToolCall

log = logging.getLogger(__name__)


# ---- requests ----------------------------------------------------------------------------------
def _text(blocks: list[TextBlockParam]) -> str:
    return "\n".join(b.text for b in blocks)


def _tool_message(block: ToolResultBlockParam) -> dict[str, Any]:
    text = _text(block.content)
    if block.is_error:  # templates have no field for it: the model reads it
        text = f"Error: {text}" if text else "Error"
    call_id = ids.template_call_id(ids.TOOL_USE, block.tool_use_id)
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _user_content(blocks: list[Any]) -> str | list[dict[str, str]]:
    """Text blocks joined with newlines; with images, the parts as templates take them."""
    if all(isinstance(b, TextBlockParam) for b in blocks):
        return _text(blocks)
    return [
        {"type": "text", "text": b.text} if isinstance(b, TextBlockParam) else {"type": "image"}
        for b in blocks
    ]


def _image(block: ImageBlockParam, param: str) -> ImageSource:
    source = block.source
    if isinstance(source, Base64ImageSource):
        return ImageSource(param, url=f"data:{source.media_type};base64,{source.data}")
    return ImageSource(param, url=source.url)


def _turn(
    message: MessageParam, index: int = 0, images: list[ImageSource] | None = None
) -> list[dict[str, Any]]:
    """One Anthropic message as chat-template messages (a user turn's tool results become
    ``tool`` messages, in their order; thinking from earlier turns is not shown; images are
    ``{"type": "image"}`` parts, their sources added to ``images`` in order)."""
    if message.role == "assistant":
        text = _text([b for b in message.content if isinstance(b, TextBlockParam)])
        calls = [
            {
                "id": ids.template_call_id(ids.TOOL_USE, b.id),
                "type": "function",
                "function": {"name": b.name, "arguments": b.input},
            }
            for b in message.content
            if isinstance(b, ToolUseBlockParam)
        ]
        if not calls:
            return [{"role": "assistant", "content": text}]
        return [{"role": "assistant", "content": text or None, "tool_calls": calls}]
    out: list[dict[str, Any]] = []
    parts: list[TextBlockParam | ImageBlockParam] = []
    for j, block in enumerate(message.content):
        if isinstance(block, TextBlockParam):
            parts.append(block)
        elif isinstance(block, ImageBlockParam):
            parts.append(block)
            if images is not None:
                images.append(_image(block, f"messages.{index}.content.{j}"))
        elif isinstance(block, ToolResultBlockParam):
            if parts:
                out.append({"role": message.role, "content": _user_content(parts)})
                parts = []
            out.append(_tool_message(block))
    if parts or not out:
        out.append({"role": message.role, "content": _user_content(parts)})
    return out


def template_messages(
    body: MessagesInput, images: list[ImageSource] | None = None
) -> list[dict[str, Any]]:
    system = _text(body.system) if body.system else ""
    messages = [{"role": "system", "content": system}] if system else []
    for i, message in enumerate(body.messages):
        messages += _turn(message, i, images)
    return messages


def template_tools(body: MessagesInput) -> list[dict[str, Any]] | None:
    """Anthropic's tools in the shape chat templates (and the core's tool parsers) take."""
    tools = body.custom_tools
    if not tools:
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
        for t in tools
    ]


def chat(body: MessagesInput) -> ChatPrompt:
    images: list[ImageSource] = []
    messages = template_messages(body, images)
    return ChatPrompt(messages, template_tools(body), body.template_args, images)


def messages_request(body: MessagesRequest, request_id: str) -> GenerationRequest:
    if body.server_tools:
        log.info(
            "request %s: server tools left out of the prompt (this server cannot run them): %s",
            request_id,
            ", ".join(body.server_tools),
        )
    return GenerationRequest(
        chat(body),
        sampling_params(body),
        unset=unset_sampling(body),
        max_tokens=body.max_tokens,
        fit_max_tokens=True,  # as Anthropic does: reaching the context's end is a stop reason
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
        return ChatPrompt(prompt.messages, None, prompt.template_args, prompt.images)
    return prompt


# ---- stream events -----------------------------------------------------------------------------
_STOP_REASONS: dict[Finish, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
}


def stop_reason(
    finish: ChoiceFinish, stop_sequence: str | None, context_full: bool = False
) -> StopReason:
    """Anthropic's reason. ``context_full``: the token limit was the room left in the context,
    less than the request's ``max_tokens``."""
    reason = _STOP_REASONS[finish_reason(finish)]
    if reason == "max_tokens" and context_full:
        return "model_context_window_exceeded"
    return "stop_sequence" if stop_sequence is not None and reason != "tool_use" else reason


def _empty(block: Block) -> ContentBlock:
    if block.kind == "thinking":
        return ThinkingBlock(thinking="")
    if block.kind == "text":
        return TextBlock(text="")
    tool_use_id = ids.call_id_as(ids.TOOL_USE, block.call_id)
    return ToolUseBlock(id=tool_use_id, name=block.name, input={})


def _delta(block: Block, text: str) -> TextDelta | ThinkingDelta | InputJsonDelta:
    if block.kind == "thinking":
        return ThinkingDelta(thinking=text)
    if block.kind == "text":
        return TextDelta(text=text)
    return InputJsonDelta(partial_json=text)


def _content_events(changes: list[BlockEvent], omit_thinking: bool) -> list[StreamEvent]:
    """The output blocks' events as content block events; with ``omit_thinking`` a thinking
    block is sent without its text."""
    events: list[StreamEvent] = []
    for change in changes:
        block = change.block
        if isinstance(change, Opened):
            events.append(ContentBlockStartEvent(index=block.index, content_block=_empty(block)))
        elif isinstance(change, Closed):
            events.append(ContentBlockStopEvent(index=block.index))
        elif not (omit_thinking and block.kind == "thinking"):
            events.append(
                ContentBlockDeltaEvent(index=block.index, delta=_delta(block, change.text))
            )
    return events


async def message_events(
    handle: RequestHandle, body: MessagesRequest
) -> AsyncIterator[StreamEvent]:
    """The Messages stream: ``message_start`` and a ``ping``, the content blocks, then
    ``message_delta`` (stop reason, final usage, ``metrics``) and ``message_stop``."""
    start = Usage(input_tokens=handle.prompt_tokens, output_tokens=0)
    message = Message(id=ids.new_id(ids.MESSAGE), model=handle.model, content=[], usage=start)
    yield MessageStartEvent(message=message)
    yield PingEvent()
    blocks = OutputBlocks()
    finish: ChoiceFinish = "stop"
    stop_sequence: str | None = None
    failed: list[FailedToolCall] | None = None  # calls a grammar held, cut by the end
    async for piece in handle:
        for event in _content_events(blocks.feed(piece), body.thinking_omitted):
            yield event
        if piece.finish_reason is not None:
            finish, stop_sequence = piece.finish_reason, piece.stop_sequence
            failed = failed_calls(piece.failed_calls)
    for event in _content_events(blocks.end(), body.thinking_omitted):
        yield event
    count = totals(handle.usage())
    limits = handle.token_limits
    reason = stop_reason(finish, stop_sequence, bool(limits) and limits[0] < body.max_tokens)
    yield MessageDeltaEvent(
        delta=MessageDelta(
            stop_reason=reason, stop_sequence=stop_sequence if reason == "stop_sequence" else None
        ),
        usage=MessageDeltaUsage(
            output_tokens=count.completion,
            input_tokens=count.uncached_prompt,
            cache_read_input_tokens=count.cached,
        ),
        metrics=timing(handle.metrics(), handle.model),
        failed_tool_calls=failed,
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
            message.failed_tool_calls = event.failed_tool_calls
    assert message is not None
    return message


def message_stream(handle: RequestHandle, body: MessagesRequest) -> Stream:
    return Stream(stream_payloads(handle, body), error_event)


MESSAGES = Door(whole=message_response, stream=message_stream)
