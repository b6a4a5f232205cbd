"""Anthropic's Messages API: what the server answers (whole responses and stream events)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
)

from schemas.common import FAILED_CALLS_DESCRIPTION, FailedToolCall, TimingMetrics


# ---- responses -----------------------------------------------------------------------------
class TextBlock(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(BaseModel):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = Field("", description="Always empty: this server signs nothing.")


class ToolUseBlock(BaseModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


ContentBlock = Annotated[TextBlock | ThinkingBlock | ToolUseBlock, Field(discriminator="type")]
StopReason = Literal[
    "end_turn", "max_tokens", "stop_sequence", "tool_use", "model_context_window_exceeded"
]

METRICS_DESCRIPTION = (
    "Extension: the server's timing for the request, as in /v1/chat (on `message_delta` in "
    "a stream)."
)


class Usage(BaseModel):
    input_tokens: int = Field(description="Prompt tokens not read from the cache.")
    output_tokens: int
    cache_read_input_tokens: int = Field(
        0, description="Prompt tokens whose KV cache was reused (a prefix of an earlier chat)."
    )
    cache_creation_input_tokens: int = 0


class Message(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ContentBlock]
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None
    usage: Usage
    metrics: TimingMetrics | None = Field(None, description=METRICS_DESCRIPTION)
    failed_tool_calls: list[FailedToolCall] | None = Field(
        None,
        description=FAILED_CALLS_DESCRIPTION + " On `message_delta` in a stream.",
        exclude_if=lambda v: v is None,
    )


class CountTokensResponse(BaseModel):
    input_tokens: int = Field(description="The prompt's tokens after the chat template.")


# ---- stream events -------------------------------------------------------------------------
class MessageStartEvent(BaseModel):
    type: Literal["message_start"] = "message_start"
    message: Message


class PingEvent(BaseModel):
    type: Literal["ping"] = "ping"


class ContentBlockStartEvent(BaseModel):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: ContentBlock


class TextDelta(BaseModel):
    type: Literal["text_delta"] = "text_delta"
    text: str


class InputJsonDelta(BaseModel):
    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ThinkingDelta(BaseModel):
    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str


BlockDelta = Annotated[TextDelta | InputJsonDelta | ThinkingDelta, Field(discriminator="type")]


class ContentBlockDeltaEvent(BaseModel):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: BlockDelta


class ContentBlockStopEvent(BaseModel):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class MessageDelta(BaseModel):
    stop_reason: StopReason
    stop_sequence: str | None = None


class MessageDeltaUsage(BaseModel):
    """Totals for the whole message (they replace message_start's)."""

    output_tokens: int
    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int = 0


class MessageDeltaEvent(BaseModel):
    type: Literal["message_delta"] = "message_delta"
    delta: MessageDelta
    usage: MessageDeltaUsage
    metrics: TimingMetrics | None = Field(None, description=METRICS_DESCRIPTION)
    failed_tool_calls: list[FailedToolCall] | None = Field(
        None, description=FAILED_CALLS_DESCRIPTION, exclude_if=lambda v: v is None
    )


class MessageStopEvent(BaseModel):
    type: Literal["message_stop"] = "message_stop"


StreamEvent = (
    MessageStartEvent
    | PingEvent
    | ContentBlockStartEvent
    | ContentBlockDeltaEvent
    | ContentBlockStopEvent
    | MessageDeltaEvent
    | MessageStopEvent
)


# ---- errors --------------------------------------------------------------------------------
AnthropicErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "timeout_error",
    "overloaded_error",
]


class AnthropicErrorDetail(BaseModel):
    type: AnthropicErrorType
    message: str


class AnthropicErrorResponse(BaseModel):
    """Every error on /v1/messages, and the ``error`` event of its stream."""

    type: Literal["error"] = "error"
    error: AnthropicErrorDetail
    request_id: str | None = None
