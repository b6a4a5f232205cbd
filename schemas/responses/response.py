"""OpenAI's Responses API: what the server answers (whole responses and stream events)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
)

from schemas.common import FAILED_CALLS_DESCRIPTION, FailedToolCall, TimingMetrics
from schemas.responses.items import (
    FunctionTool,
    ItemStatus,
    NamespaceTool,
    SummaryText,
    TextConfig,
    ToolChoiceFunction,
)


# ---- the response ------------------------------------------------------------------------
class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[dict[str, Any]] = Field(default_factory=list, description="Always empty.")
    logprobs: list[dict[str, Any]] = Field(default_factory=list, description="Always empty.")


class OutputMessage(BaseModel):
    type: Literal["message"] = "message"
    id: str
    role: Literal["assistant"] = "assistant"
    status: ItemStatus
    content: list[OutputText]


class ReasoningTextOut(BaseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningOut(BaseModel):
    """The model's thinking, split out of the answer (models that think: Qwen3, ...)."""

    type: Literal["reasoning"] = "reasoning"
    id: str
    summary: list[SummaryText] = Field(default_factory=list, description="Always empty.")
    content: list[ReasoningTextOut]
    status: ItemStatus


class FunctionCallOut(BaseModel):
    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str = Field(description="Answer it with a function_call_output of this call_id.")
    name: str
    namespace: str | None = Field(
        None, description="The namespace tool that holds `name`, when it is in one."
    )
    arguments: str = Field(description="A JSON object, as a string.")
    status: ItemStatus


OutputItem = Annotated[OutputMessage | ReasoningOut | FunctionCallOut, Field(discriminator="type")]


class InputTokensDetails(BaseModel):
    cached_tokens: int = Field(0, description="Prompt tokens served from the KV cache.")
    cache_write_tokens: int = Field(0, description="Always 0: prefix reuse is automatic.")


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = Field(0, description="Tokens generated while the model thought.")
    drafted_tokens: int | None = Field(
        None,
        description="Extension, only when n-gram speculation drafted tokens: drafted tokens "
        "the model verified.",
        exclude_if=lambda v: v is None,
    )
    accepted_tokens: int | None = Field(
        None,
        description="Extension, with drafted_tokens: the drafted tokens taken (part of "
        "output_tokens).",
        exclude_if=lambda v: v is None,
    )


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens"]


ResponseStatus = Literal["in_progress", "completed", "incomplete"]


class ResponsesResponse(BaseModel):
    """The response object. A failure is never a ``failed`` response: it is an HTTP error, or
    in a stream an ``error`` event."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: ResponseStatus
    incomplete_details: IncompleteDetails | None = Field(
        None, description="`max_output_tokens` when the output was cut at the token limit."
    )
    error: None = Field(None, description="Always null (see above).")
    model: str
    output: list[OutputItem]
    instructions: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    parallel_tool_calls: bool
    temperature: float
    top_p: float
    tool_choice: Literal["none", "auto", "required"] | ToolChoiceFunction
    tools: list[FunctionTool | NamespaceTool] = Field(
        description="The tools offered to the model: hosted ones are left out."
    )
    max_output_tokens: int | None = None
    previous_response_id: str | None = Field(
        None, description="The stored response this one continues."
    )
    store: bool = Field(
        True, description="Whether it is kept (GET /v1/responses/{id}, previous_response_id)."
    )
    background: Literal[False] = False
    text: TextConfig
    truncation: Literal["disabled"] = "disabled"
    user: str | None = None
    usage: ResponseUsage | None = Field(None, description="Set once the response has ended.")
    metrics: TimingMetrics | None = Field(
        None,
        description="Extension: the server's timing for the request, as in /v1/chat; set once "
        "the response has ended.",
    )
    failed_tool_calls: list[FailedToolCall] | None = Field(
        None, description=FAILED_CALLS_DESCRIPTION, exclude_if=lambda v: v is None
    )


# ---- stream events -----------------------------------------------------------------------
class ResponseCreatedEvent(BaseModel):
    type: Literal["response.created"] = "response.created"
    sequence_number: int
    response: ResponsesResponse


class ResponseInProgressEvent(BaseModel):
    type: Literal["response.in_progress"] = "response.in_progress"
    sequence_number: int
    response: ResponsesResponse


class ResponseCompletedEvent(BaseModel):
    type: Literal["response.completed"] = "response.completed"
    sequence_number: int
    response: ResponsesResponse


class ResponseIncompleteEvent(BaseModel):
    """The stream's end when the output was cut at the token limit (OpenAI's event for it)."""

    type: Literal["response.incomplete"] = "response.incomplete"
    sequence_number: int
    response: ResponsesResponse


class OutputItemAddedEvent(BaseModel):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    sequence_number: int
    output_index: int
    item: OutputItem


class OutputItemDoneEvent(BaseModel):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    sequence_number: int
    output_index: int
    item: OutputItem


ContentPart = Annotated[OutputText | ReasoningTextOut, Field(discriminator="type")]


class ContentPartAddedEvent(BaseModel):
    type: Literal["response.content_part.added"] = "response.content_part.added"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


class ContentPartDoneEvent(BaseModel):
    type: Literal["response.content_part.done"] = "response.content_part.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


class OutputTextDeltaEvent(BaseModel):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class OutputTextDoneEvent(BaseModel):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class ReasoningTextDeltaEvent(BaseModel):
    type: Literal["response.reasoning_text.delta"] = "response.reasoning_text.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDoneEvent(BaseModel):
    type: Literal["response.reasoning_text.done"] = "response.reasoning_text.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str


class FunctionCallArgumentsDeltaEvent(BaseModel):
    type: Literal["response.function_call_arguments.delta"] = (
        "response.function_call_arguments.delta"
    )
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class FunctionCallArgumentsDoneEvent(BaseModel):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    sequence_number: int
    item_id: str
    output_index: int
    name: str
    arguments: str


class ResponseErrorEvent(BaseModel):
    """A failure after the stream started (a timeout, an operator's cancel, a shutdown): the
    stream ends here, with no ``response.completed``."""

    type: Literal["error"] = "error"
    sequence_number: int
    code: str | None = None
    message: str
    param: str | None = None


ResponseStreamEvent = (
    ResponseCreatedEvent
    | ResponseInProgressEvent
    | ResponseCompletedEvent
    | ResponseIncompleteEvent
    | OutputItemAddedEvent
    | OutputItemDoneEvent
    | ContentPartAddedEvent
    | ContentPartDoneEvent
    | OutputTextDeltaEvent
    | OutputTextDoneEvent
    | ReasoningTextDeltaEvent
    | ReasoningTextDoneEvent
    | FunctionCallArgumentsDeltaEvent
    | FunctionCallArgumentsDoneEvent
    | ResponseErrorEvent
)

# What a /v1/responses stream sends, one JSON object per event (documented in OpenAPI).
RESPONSE_STREAM_EVENTS = (
    ResponseCreatedEvent,
    ResponseInProgressEvent,
    ResponseCompletedEvent,
    ResponseIncompleteEvent,
    OutputItemAddedEvent,
    OutputItemDoneEvent,
    ContentPartAddedEvent,
    ContentPartDoneEvent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ReasoningTextDeltaEvent,
    ReasoningTextDoneEvent,
    FunctionCallArgumentsDeltaEvent,
    FunctionCallArgumentsDoneEvent,
    ResponseErrorEvent,
)
