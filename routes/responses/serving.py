"""OpenAI's Responses API over the core, free of FastAPI: a request's turn (its body and the
stored conversation it continues: routes/responses/state.py) → GenerationRequest, and a request
handle → the response, whole or streamed (its builder: routes/responses/builder.py), kept in the
store once it ended.

The tool calls, the model's thinking and the usage totals are the core's; this module only
renames and reshapes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from backends.core.handle import RequestHandle
from backends.core.request import ChatPrompt, GenerationRequest
from backends.types import ImageSource, Transcript
from routes.door.answer import Door, Stream
from routes.door.convert import sampling_params, unset_sampling
from routes.responses.builder import ResponseBuilder
from routes.responses.state import Turn
from schemas.responses import (
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    InputImage,
    InputMessage,
    ResponsesRequest,
    ResponsesResponse,
    ResponseStreamEvent,
)

log = logging.getLogger(__name__)

# This door's names for the core's fields, where they differ (for errors).
FIELDS = {"prompt": "input", "max_tokens": "max_output_tokens", "guidance": "text.format"}


# ---- requests ----------------------------------------------------------------------------------
def responses_request(
    body: ResponsesRequest,
    request_id: str,
    earlier: Sequence[Any] = (),
    continues: Transcript | None = None,
) -> GenerationRequest:
    """The core's request for ``body``, after the ``earlier`` items of the conversation it
    continues (validated input items) and the tokens the model read and wrote for them."""
    if body.hosted_tools:
        log.info(
            "request %s: hosted tools left out of the prompt (this server cannot run them): %s",
            request_id,
            ", ".join(body.hosted_tools),
        )
    functions = body.functions
    items = [*earlier, *body.input]
    if continues is not None:  # it covers the earlier items' messages
        covered = len(template_messages(body.instructions, earlier))
        continues = dataclasses.replace(continues, messages=covered)
    return GenerationRequest(
        ChatPrompt(
            template_messages(body.instructions, items),
            tools=[template_tool(t) for t in functions] if functions else None,
            template_args=body.template_args,
            images=image_sources(items, len(earlier)),
            continues=continues,
        ),
        sampling_params(body, json_schema=body.json_schema),
        unset=unset_sampling(body),
        max_tokens=body.max_output_tokens,
        stop=body.stop_list,
        model=body.model,
        request_id=request_id,
        tool_choice=body.tool_choice_name,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        split_reasoning=True,
    )


def image_sources(items: Sequence[Any], earlier: int = 0) -> list[ImageSource]:
    """The conversation's images, in order, named by where the client put them (the first
    ``earlier`` items came from ``previous_response_id``)."""
    return [
        ImageSource(
            f"input.{i - earlier}.content.{j}" if i >= earlier else "previous_response_id",
            url=part.image_url,
        )
        for i, item in enumerate(items)
        if isinstance(item, InputMessage)
        for j, part in enumerate(item.content)
        if isinstance(part, InputImage)
    ]


def template_tool(tool: FunctionTool) -> dict[str, Any]:
    """A flat Responses tool, nested as chat templates (and Chat Completions) have it."""
    function = tool.model_dump(exclude={"type"}, exclude_none=True)
    return {"type": "function", "function": function}


def template_messages(instructions: str | None, items: Sequence[Any]) -> list[dict[str, Any]]:
    """``instructions`` and the input items as chat messages: calls join the assistant turn
    they belong to (as ``tool_calls``), call outputs are ``tool`` messages, and the model's
    earlier thinking is left out (chat templates drop it from earlier turns)."""
    messages: list[dict[str, Any]] = []
    if instructions is not None:
        messages.append({"role": "system", "content": instructions})
    for item in items:
        if isinstance(item, InputMessage):
            role = "system" if item.role == "developer" else item.role
            messages.append({"role": role, "content": item.template_content})
        elif isinstance(item, FunctionCallItem):
            turn = messages[-1] if messages and messages[-1]["role"] == "assistant" else None
            if turn is None:
                turn = {"role": "assistant", "content": None}
                messages.append(turn)
            turn.setdefault("tool_calls", []).append(_template_call(item))
        elif isinstance(item, FunctionCallOutputItem):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.text})
    return messages


def _template_call(item: FunctionCallItem) -> dict[str, Any]:
    # Templates expect the arguments as an object (as Hugging Face passes them).
    try:
        arguments: Any = json.loads(item.arguments)
    except ValueError:
        arguments = item.arguments
    return {
        "id": item.call_id,
        "type": "function",
        "function": {"name": item.name, "arguments": arguments},
    }


# ---- whole responses and streams ---------------------------------------------------------------
async def response(handle: RequestHandle, turn: Turn) -> ResponsesResponse:
    builder = ResponseBuilder(handle, turn.body)
    async for piece in handle:
        builder.feed(piece)
    done = builder.response()
    await turn.keep(done, handle.transcript())
    return done


def response_stream(handle: RequestHandle, turn: Turn) -> Stream:
    """The stream (``event: <type>`` each): ``response.created``, ``response.in_progress``, the
    items' events, then ``response.completed`` (``response.incomplete`` at the token limit),
    sent once the response is stored. A generation that fails ends it with an ``error`` event
    instead, and nothing is stored."""
    builder = ResponseBuilder(handle, turn.body)
    return Stream(_payloads(_events(builder, handle, turn)), builder.error_event)


async def _events(
    builder: ResponseBuilder, handle: RequestHandle, turn: Turn
) -> AsyncIterator[ResponseStreamEvent]:
    for event in builder.start():
        yield event
    async for piece in handle:
        for event in builder.feed(piece):
            yield event
    last = builder.end()
    await turn.keep(last.response, handle.transcript())
    yield last


async def _payloads(events: AsyncIterator[ResponseStreamEvent]) -> AsyncIterator[tuple[str, str]]:
    async for event in events:
        yield event.type, event.model_dump_json(by_alias=True)


RESPONSES = Door(whole=response, stream=response_stream)
