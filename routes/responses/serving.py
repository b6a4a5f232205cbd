"""OpenAI's Responses API over the core, free of FastAPI: a request body → GenerationRequest, and
a request handle's pieces → output items, the response object and its stream events.

One builder turns the pieces into output items and, as it goes, into the events that build
them; a whole response is the same builder's last state, so a stream's ``response.completed``
and the JSON answer to the same request agree. The tool calls, the model's thinking and the
usage totals are the core's; this module only renames and reshapes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from backends.core.handle import ChoiceDelta, RequestHandle
from backends.core.request import ChatPrompt, GenerationRequest
from backends.errors import GenAIError
from backends.types import ChoiceFinish
from routes.door.convert import sampling_params, timing
from schemas.responses import (
    ContentPartAddedEvent,
    ContentPartDoneEvent,
    FunctionCallArgumentsDeltaEvent,
    FunctionCallArgumentsDoneEvent,
    FunctionCallItem,
    FunctionCallOut,
    FunctionCallOutputItem,
    FunctionTool,
    IncompleteDetails,
    InputMessage,
    InputTokensDetails,
    ItemStatus,
    OutputItem,
    OutputItemAddedEvent,
    OutputItemDoneEvent,
    OutputMessage,
    OutputText,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    OutputTokensDetails,
    ReasoningOut,
    ReasoningTextDeltaEvent,
    ReasoningTextDoneEvent,
    ReasoningTextOut,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseErrorEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponsesRequest,
    ResponsesResponse,
    ResponseStatus,
    ResponseStreamEvent,
    ResponseUsage,
    TextConfig,
)

# How this door names the core's fields in error messages.
PARAM_NAMES = {"prompt": "input", "max_tokens": "max_output_tokens", "guidance": "text.format"}


# ---- requests ----------------------------------------------------------------------------------
def responses_request(body: ResponsesRequest, request_id: str) -> GenerationRequest:
    return GenerationRequest(
        ChatPrompt(
            template_messages(body),
            tools=[template_tool(t) for t in body.tools] if body.tools else None,
            template_args=body.chat_template_kwargs,
        ),
        sampling_params(body, json_schema=body.json_schema),
        max_tokens=body.max_output_tokens,
        stop=body.stop_list,
        model=body.model,
        request_id=request_id,
        param_names=PARAM_NAMES,
        tool_choice=body.tool_choice_name,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        split_reasoning=True,
    )


def template_tool(tool: FunctionTool) -> dict[str, Any]:
    """A flat Responses tool, nested as chat templates (and Chat Completions) have it."""
    function = tool.model_dump(exclude={"type"}, exclude_none=True)
    return {"type": "function", "function": function}


def template_messages(body: ResponsesRequest) -> list[dict[str, Any]]:
    """``instructions`` and the input items as chat messages: calls join the assistant turn
    they belong to (as ``tool_calls``), call outputs are ``tool`` messages, and the model's
    earlier thinking is left out (chat templates drop it from earlier turns)."""
    messages: list[dict[str, Any]] = []
    if body.instructions is not None:
        messages.append({"role": "system", "content": body.instructions})
    for item in body.input:
        if isinstance(item, InputMessage):
            role = "system" if item.role == "developer" else item.role
            messages.append({"role": role, "content": item.text})
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


# ---- output items ------------------------------------------------------------------------------
ItemKind = Literal["message", "reasoning", "function_call"]
_ID_PREFIX: dict[ItemKind, str] = {"message": "msg", "reasoning": "rs", "function_call": "fc"}


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class _Item:
    """An output item as it grows: a message's text, the thinking, or a call's arguments."""

    kind: ItemKind
    id: str
    index: int  # its place in ``output``
    text: str = ""
    name: str = ""
    call_id: str = ""
    status: ItemStatus = "in_progress"

    def render(self) -> OutputItem:
        done = self.status != "in_progress"
        if self.kind == "message":
            content = [OutputText(text=self.text)] if done else []
            return OutputMessage(id=self.id, status=self.status, content=content)
        if self.kind == "reasoning":
            thought = [ReasoningTextOut(text=self.text)] if done else []
            return ReasoningOut(id=self.id, status=self.status, content=thought)
        return FunctionCallOut(
            id=self.id,
            call_id=self.call_id,
            name=self.name,
            arguments=self.text,
            status=self.status,
        )


class ResponseBuilder:
    """One response: feed the handle's pieces in order; each call returns the stream events
    it makes. Items open as the output turns to thinking, answer text or a call, and close
    when it turns to something else, so every item is whole before the next one starts."""

    def __init__(self, handle: RequestHandle, body: ResponsesRequest) -> None:
        self.id = _new_id("resp")
        self._handle = handle
        self._body = body
        self._items: list[_Item] = []
        self._open: _Item | None = None
        self._calls: dict[int, _Item] = {}  # the core's call index → its item
        self._sequence = 0
        self._generated = 0
        self._reasoning_tokens = 0
        self.finish_reason: ChoiceFinish | None = None

    def _seq(self) -> int:
        self._sequence += 1
        return self._sequence - 1

    # ---- the response object ---------------------------------------------------------------
    def response(self) -> ResponsesResponse:
        """The response as it stands: in progress, or ended once the last piece was fed."""
        body, handle = self._body, self._handle
        ended = self.finish_reason is not None
        status: ResponseStatus = "completed" if ended else "in_progress"
        if self.finish_reason == "length":
            status = "incomplete"
        usage = metrics = None
        if ended:
            totals = handle.usage()
            usage = ResponseUsage(
                input_tokens=totals.prompt_tokens,
                input_tokens_details=InputTokensDetails(cached_tokens=totals.cached_tokens),
                output_tokens=totals.completion_tokens,
                output_tokens_details=OutputTokensDetails(reasoning_tokens=self._reasoning_tokens),
                total_tokens=totals.prompt_tokens + totals.completion_tokens,
            )
            metrics = timing(handle.metrics(), handle.model)
        return ResponsesResponse(
            id=self.id,
            created_at=handle.created,
            completed_at=int(time.time()) if status == "completed" else None,
            status=status,
            incomplete_details=(
                IncompleteDetails(reason="max_output_tokens") if status == "incomplete" else None
            ),
            model=handle.model,
            output=[item.render() for item in self._items] if ended else [],
            instructions=body.instructions,
            metadata=body.metadata or {},
            parallel_tool_calls=body.parallel_tool_calls is not False,
            temperature=body.temperature,
            top_p=body.top_p,
            tool_choice=body.tool_choice or "auto",
            tools=body.tools or [],
            max_output_tokens=body.max_output_tokens,
            text=body.text or TextConfig(),
            user=body.user,
            usage=usage,
            metrics=metrics,
        )

    def start(self) -> list[ResponseStreamEvent]:
        response = self.response()
        return [
            ResponseCreatedEvent(sequence_number=self._seq(), response=response),
            ResponseInProgressEvent(sequence_number=self._seq(), response=response),
        ]

    def end(self) -> ResponseStreamEvent:
        """The stream's last event, once the last piece was fed."""
        response = self.response()
        if response.status == "incomplete":
            return ResponseIncompleteEvent(sequence_number=self._seq(), response=response)
        return ResponseCompletedEvent(sequence_number=self._seq(), response=response)

    def error(self, exc: GenAIError) -> ResponseErrorEvent:
        code = exc.code or exc.error_type
        return ResponseErrorEvent(
            sequence_number=self._seq(), code=code, message=exc.message, param=exc.param
        )

    # ---- pieces ----------------------------------------------------------------------------
    def feed(self, piece: ChoiceDelta) -> list[ResponseStreamEvent]:
        events: list[ResponseStreamEvent] = []
        if piece.token is not None:
            self._generated += 1
        if piece.reasoning:
            # Thinking comes first: the tokens made until it ended are reasoning tokens.
            self._reasoning_tokens = self._generated
            events += self._append("reasoning", piece.reasoning)
        if piece.text:
            events += self._append("message", piece.text)
        for call in piece.calls:
            if call.id is not None:
                events += self._switch("function_call", call.id, call.name or "")
                assert self._open is not None
                self._calls[call.index] = self._open
            if call.arguments:
                item = self._calls[call.index]
                item.text += call.arguments
                events.append(
                    FunctionCallArgumentsDeltaEvent(
                        sequence_number=self._seq(),
                        item_id=item.id,
                        output_index=item.index,
                        delta=call.arguments,
                    )
                )
        if piece.finish_reason is not None:
            status: ItemStatus = "incomplete" if piece.finish_reason == "length" else "completed"
            events += self._close(status)
            if not self._items:  # nothing at all was said: an empty answer, still an answer
                events += self._switch("message") + self._close(status)
            self.finish_reason = piece.finish_reason
        return events

    def _append(self, kind: ItemKind, text: str) -> list[ResponseStreamEvent]:
        events = self._switch(kind) if self._open is None or self._open.kind != kind else []
        item = self._open
        assert item is not None
        item.text += text
        delta = ReasoningTextDeltaEvent if kind == "reasoning" else OutputTextDeltaEvent
        events.append(
            delta(
                sequence_number=self._seq(),
                item_id=item.id,
                output_index=item.index,
                content_index=0,
                delta=text,
            )
        )
        return events

    def _switch(
        self, kind: ItemKind, call_id: str = "", name: str = ""
    ) -> list[ResponseStreamEvent]:
        """Close the open item and open a new one of ``kind`` (a call has an id and a name)."""
        events = self._close("completed")
        item = _Item(kind, _new_id(_ID_PREFIX[kind]), len(self._items), call_id=call_id, name=name)
        self._items.append(item)
        self._open = item
        events.append(
            OutputItemAddedEvent(
                sequence_number=self._seq(), output_index=item.index, item=item.render()
            )
        )
        if kind != "function_call":
            part = OutputText(text="") if kind == "message" else ReasoningTextOut(text="")
            events.append(
                ContentPartAddedEvent(
                    sequence_number=self._seq(),
                    item_id=item.id,
                    output_index=item.index,
                    content_index=0,
                    part=part,
                )
            )
        return events

    def _close(self, status: ItemStatus) -> list[ResponseStreamEvent]:
        item, self._open = self._open, None
        if item is None:
            return []
        item.status = status
        seq, at = self._seq, {"item_id": item.id, "output_index": item.index}
        events: list[ResponseStreamEvent] = []
        if item.kind == "function_call":
            events.append(
                FunctionCallArgumentsDoneEvent(
                    sequence_number=seq(), **at, name=item.name, arguments=item.text
                )
            )
        elif item.kind == "message":
            part: OutputText | ReasoningTextOut = OutputText(text=item.text)
            events.append(
                OutputTextDoneEvent(sequence_number=seq(), **at, content_index=0, text=item.text)
            )
        else:
            part = ReasoningTextOut(text=item.text)
            events.append(
                ReasoningTextDoneEvent(sequence_number=seq(), **at, content_index=0, text=item.text)
            )
        if item.kind != "function_call":
            events.append(
                ContentPartDoneEvent(sequence_number=seq(), **at, content_index=0, part=part)
            )
        events.append(
            OutputItemDoneEvent(sequence_number=seq(), output_index=item.index, item=item.render())
        )
        return events


# ---- whole responses and streams ---------------------------------------------------------------
async def response(handle: RequestHandle, body: ResponsesRequest) -> ResponsesResponse:
    builder = ResponseBuilder(handle, body)
    async for piece in handle:
        builder.feed(piece)
    return builder.response()


async def response_events(
    handle: RequestHandle, body: ResponsesRequest
) -> AsyncIterator[ResponseStreamEvent]:
    """The stream: ``response.created``, ``response.in_progress``, the items' events, then
    ``response.completed`` (``response.incomplete`` at the token limit). A generation the
    server ends is an ``error`` event instead, and the stream ends there."""
    builder = ResponseBuilder(handle, body)
    for event in builder.start():
        yield event
    try:
        async for piece in handle:
            for event in builder.feed(piece):
                yield event
    except GenAIError as exc:
        yield builder.error(exc)
        return
    yield builder.end()
