"""OpenAI's chat completions, completions and models: what the server answers (whole responses and
stream events)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from schemas.common import (
    FAILED_CALLS_DESCRIPTION,
    FailedToolCall,
    TimingMetrics,
)
from schemas.openai.request import (
    CalledFunction,
)


# ---- responses -----------------------------------------------------------------------------
class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(0, description="Prompt tokens served from the KV cache.")
    image_tokens: int | None = Field(
        None,
        description="Prompt tokens that stand for images (only with images).",
        exclude_if=lambda v: v is None,
    )


SPECULATION_DETAILS = (
    "Extension, only when n-gram speculation drafted tokens for the request (all choices)"
)


class CompletionTokensDetails(BaseModel):
    drafted_tokens: int = Field(
        description=f"{SPECULATION_DETAILS}: drafted tokens the model verified."
    )
    accepted_tokens: int = Field(
        description=f"{SPECULATION_DETAILS}: the drafted tokens taken (part of completion_tokens)."
    )


class UsageInfo(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)
    completion_tokens_details: CompletionTokensDetails | None = Field(
        None, description=SPECULATION_DETAILS + ".", exclude_if=lambda v: v is None
    )


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChatLogprobs(BaseModel):
    content: list[TokenLogprob] | None = None
    refusal: list[TokenLogprob] | None = None


class ToolCallOut(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: CalledFunction


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = Field(
        None, description="Extension (llama-server, vLLM): the model's thinking, split out."
    )
    tool_calls: list[ToolCallOut] | None = None


FinishReason = Literal["stop", "length", "tool_calls"]

METRICS_DESCRIPTION = (
    "Extension: the server's timing for the whole request (all choices), as in /v1/chat. "
    "In a stream it is on the last chunk before `[DONE]` only."
)


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: FinishReason | None = None
    failed_tool_calls: list[FailedToolCall] | None = Field(
        None, description=FAILED_CALLS_DESCRIPTION, exclude_if=lambda v: v is None
    )


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo
    system_fingerprint: str | None = None
    metrics: TimingMetrics = Field(description=METRICS_DESCRIPTION)


class DeltaFunction(BaseModel):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(BaseModel):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: DeltaFunction


class ChatDelta(BaseModel):
    """Only the fields that are set are sent (``{}`` on a finish chunk), as OpenAI does."""

    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[DeltaToolCall] | None = None

    @model_serializer(mode="wrap")
    def _drop_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class ChatChunkChoice(BaseModel):
    index: int
    delta: ChatDelta
    logprobs: ChatLogprobs | None = None
    finish_reason: FinishReason | None = None
    failed_tool_calls: list[FailedToolCall] | None = Field(
        None,
        description=FAILED_CALLS_DESCRIPTION + " On the choice's finish chunk.",
        exclude_if=lambda v: v is None,
    )


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: UsageInfo | None = Field(None, description="Only on the `include_usage` chunk.")
    system_fingerprint: str | None = None
    metrics: TimingMetrics | None = Field(None, description=METRICS_DESCRIPTION)


class CompletionLogprobs(BaseModel):
    tokens: list[str] = Field(default_factory=list)
    token_logprobs: list[float] = Field(default_factory=list)
    top_logprobs: list[dict[str, float]] | None = None
    text_offset: list[int] = Field(default_factory=list)


class CompletionChoice(BaseModel):
    index: int = Field(description="prompt index × n + choice index")
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: FinishReason | None = None


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo | None = None
    system_fingerprint: str | None = None
    metrics: TimingMetrics | None = Field(None, description=METRICS_DESCRIPTION)


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "onnx-genai"
    root: str | None = Field(None, description="The model folder (vLLM's field).")
    parent: str | None = Field(None, description="For a LoRA adapter: its base model.")
    max_model_len: int | None = Field(
        None, description="Tokens per sequence (prompt + output); null while loading."
    )
    context_length: int | None = Field(None, description="Same as max_model_len.")
    modalities: list[str] | None = Field(
        None, description="What the model reads: text, and image or audio; null while loading."
    )
    kind: Literal["generator", "embedding", "reranker", "transcription"] = Field(
        "generator",
        description="What it serves: text generation, embeddings, reranking or transcription.",
    )
    loaded: bool | None = Field(
        None,
        description="In memory now; false: it loads on its first request (GENAI_LOAD, "
        "GENAI_KEEP_LOADED).",
    )


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class RenderedPrompt(BaseModel):
    """What a render route answers for one prompt (vLLM's ``/render`` routes, which the
    inference gateway's endpoint picker calls to tokenize as the server does)."""

    token_ids: list[int] = Field(
        ..., description="The prompt's token ids, exactly as the model is fed them."
    )
