"""One response as it is made: the handle's pieces → output items, and as it goes the stream
events that build them.

The items are the output blocks (routes/door/blocks.py: thinking, answer text, each call) in
Responses' names: a reasoning item, a message, a function call. A whole response is the same
builder's last state, so a stream's ``response.completed`` and the JSON answer to the same
request agree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from backends.chat.parsers import FailedCall
from backends.core.handle import ChoiceDelta, RequestHandle
from backends.types import ChoiceFinish
from routes.door import ids
from routes.door.blocks import Added, Block, BlockEvent, BlockKind, Closed, Opened, OutputBlocks
from routes.door.convert import failed_calls, timing, totals
from routes.http.errors import failure
from schemas.responses import (
    ContentPartAddedEvent,
    ContentPartDoneEvent,
    FunctionCallArgumentsDeltaEvent,
    FunctionCallArgumentsDoneEvent,
    FunctionCallOut,
    IncompleteDetails,
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

_ID_PREFIX: dict[BlockKind, str] = {
    "text": ids.MESSAGE,
    "thinking": ids.REASONING,
    "call": ids.FUNCTION_CALL,
}


@dataclass
class _Item:
    """An output block as a Responses item: its id and its status."""

    block: Block
    id: str
    status: ItemStatus = "in_progress"

    namespace: str | None = None

    def render(self, text: str) -> OutputItem:
        done = self.status != "in_progress"
        kind = self.block.kind
        if kind == "text":
            content = [OutputText(text=text)] if done else []
            return OutputMessage(id=self.id, status=self.status, content=content)
        if kind == "thinking":
            thought = [ReasoningTextOut(text=text)] if done else []
            return ReasoningOut(id=self.id, status=self.status, content=thought)
        return FunctionCallOut(
            id=self.id,
            call_id=self.block.call_id,
            name=self.block.name,
            namespace=self.namespace,
            arguments=text,
            status=self.status,
        )


class ResponseBuilder:
    """One response: feed the handle's pieces in order; each call returns the stream events
    it makes. Items open as the output turns to thinking, answer text or a call, and close
    when it turns to something else, so every item is whole before the next one starts."""

    def __init__(self, handle: RequestHandle, body: ResponsesRequest) -> None:
        self.id = ids.new_id(ids.RESPONSE)
        self._handle = handle
        self._body = body
        self._blocks = OutputBlocks()
        self._items: list[_Item] = []  # the blocks' items, in the same order
        self._namespaces = body.namespaces
        self._sequence = 0
        self._generated = 0
        self._reasoning_tokens = 0
        self.finish_reason: ChoiceFinish | None = None
        self._failed: tuple[FailedCall, ...] = ()  # calls the output ended inside

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
            count = totals(handle.usage())
            usage = ResponseUsage(
                input_tokens=count.prompt,
                input_tokens_details=InputTokensDetails(cached_tokens=count.cached),
                output_tokens=count.completion,
                output_tokens_details=OutputTokensDetails(
                    reasoning_tokens=self._reasoning_tokens,
                    drafted_tokens=count.drafted or None,
                    accepted_tokens=count.accepted if count.drafted else None,
                ),
                total_tokens=count.total,
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
            output=[item.render(item.block.text) for item in self._items] if ended else [],
            instructions=body.instructions,
            metadata=body.metadata or {},
            parallel_tool_calls=body.parallel_tool_calls is not False,
            temperature=handle.sampling.temperature,  # the model's defaults filled in
            top_p=handle.sampling.top_p,
            tool_choice=body.tool_choice or "auto",
            tools=body.offered_tools,
            max_output_tokens=body.max_output_tokens,
            text=body.text or TextConfig(),
            previous_response_id=body.previous_response_id,
            store=body.store is not False,
            user=body.user,
            usage=usage,
            metrics=metrics,
            failed_tool_calls=failed_calls(self._failed),
        )

    def start(self) -> list[ResponseStreamEvent]:
        response = self.response()
        return [
            ResponseCreatedEvent(sequence_number=self._seq(), response=response),
            ResponseInProgressEvent(sequence_number=self._seq(), response=response),
        ]

    def end(self) -> ResponseCompletedEvent | ResponseIncompleteEvent:
        """The stream's last event, once the last piece was fed."""
        response = self.response()
        if response.status == "incomplete":
            return ResponseIncompleteEvent(sequence_number=self._seq(), response=response)
        return ResponseCompletedEvent(sequence_number=self._seq(), response=response)

    def error(self, exc: Exception) -> ResponseErrorEvent:
        """The event that ends a stream on ``exc``, as the error policy tells it."""
        return self._error(failure(exc, during="stream").body)

    def error_event(self, status: int, body: dict[str, Any]) -> tuple[str, str]:
        """The stream's error event for a failure in the one shape (routes/http/sse.py)."""
        return "error", self._error(body).model_dump_json(by_alias=True)

    def _error(self, body: dict[str, Any]) -> ResponseErrorEvent:
        error = body["error"]
        code = error.get("code") or error["type"]
        return ResponseErrorEvent(
            sequence_number=self._seq(),
            code=str(code),
            message=error["message"],
            param=error.get("param"),
        )

    # ---- pieces ----------------------------------------------------------------------------
    def feed(self, piece: ChoiceDelta) -> list[ResponseStreamEvent]:
        if piece.token is not None:
            self._generated += 1
        if piece.reasoning:
            # Thinking comes first: the tokens made until it ended are reasoning tokens.
            self._reasoning_tokens = self._generated
        events = self._render(self._blocks.feed(piece), "completed")
        if piece.finish_reason is not None:
            status: ItemStatus = "incomplete" if piece.finish_reason == "length" else "completed"
            # A call that failed is the output's last word: no empty message stands for it.
            never_empty = not piece.failed_calls
            events += self._render(self._blocks.end(never_empty=never_empty), status)
            self._failed = piece.failed_calls
            self.finish_reason = piece.finish_reason
        return events

    def _render(self, changes: list[BlockEvent], closing: ItemStatus) -> list[ResponseStreamEvent]:
        """The block events as Responses' events; a block that closes gets ``closing``."""
        events: list[ResponseStreamEvent] = []
        for change in changes:
            if isinstance(change, Opened):
                events += self._opened(change.block)
            elif isinstance(change, Added):
                events.append(self._added(change.block, change.text))
            else:
                events += self._closed(change, closing)
        return events

    def _opened(self, block: Block) -> list[ResponseStreamEvent]:
        item = _Item(block, ids.new_id(_ID_PREFIX[block.kind]))
        if block.kind == "call":
            item.namespace = self._namespaces.get(block.name)
        self._items.append(item)
        events: list[ResponseStreamEvent] = [
            OutputItemAddedEvent(
                sequence_number=self._seq(), output_index=block.index, item=item.render("")
            )
        ]
        if block.kind != "call":
            part = OutputText(text="") if block.kind == "text" else ReasoningTextOut(text="")
            events.append(
                ContentPartAddedEvent(
                    sequence_number=self._seq(),
                    item_id=item.id,
                    output_index=block.index,
                    content_index=0,
                    part=part,
                )
            )
        return events

    def _added(self, block: Block, text: str) -> ResponseStreamEvent:
        at = {"item_id": self._items[block.index].id, "output_index": block.index}
        if block.kind == "call":
            return FunctionCallArgumentsDeltaEvent(sequence_number=self._seq(), **at, delta=text)
        delta = ReasoningTextDeltaEvent if block.kind == "thinking" else OutputTextDeltaEvent
        return delta(sequence_number=self._seq(), **at, content_index=0, delta=text)

    def _closed(self, change: Closed, status: ItemStatus) -> list[ResponseStreamEvent]:
        block, text = change.block, change.text
        item = self._items[block.index]
        item.status = status
        seq, at = self._seq, {"item_id": item.id, "output_index": block.index}
        events: list[ResponseStreamEvent] = []
        if block.kind == "call":
            events.append(
                FunctionCallArgumentsDoneEvent(
                    sequence_number=seq(), **at, name=block.name, arguments=text
                )
            )
        elif block.kind == "text":
            part: OutputText | ReasoningTextOut = OutputText(text=text)
            events.append(
                OutputTextDoneEvent(sequence_number=seq(), **at, content_index=0, text=text)
            )
        else:
            part = ReasoningTextOut(text=text)
            events.append(
                ReasoningTextDoneEvent(sequence_number=seq(), **at, content_index=0, text=text)
            )
        if block.kind != "call":
            events.append(
                ContentPartDoneEvent(sequence_number=seq(), **at, content_index=0, part=part)
            )
        events.append(
            OutputItemDoneEvent(
                sequence_number=seq(), output_index=block.index, item=item.render(text)
            )
        )
        return events
