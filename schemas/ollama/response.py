"""What Ollama's native API answers: chat and generate responses (whole, or each line of a
stream), the model listings, and the one error shape, ``{"error": "..."}``.

Fields Ollama leaves out when empty (Go's ``omitempty``) are None here and left out of the
JSON (``exclude_none``); durations are in nanoseconds.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from schemas.common import FAILED_CALLS_DESCRIPTION, FailedToolCall

DoneReason = Literal["stop", "length", "load"]


class OllamaError(BaseModel):
    error: str = Field(description="What went wrong, in one sentence.")


# ---- generation ----------------------------------------------------------------------------
class CalledFunction(BaseModel):
    index: int = Field(description="The call's place among the turn's calls.")
    name: str
    arguments: dict[str, Any]


class ToolCall(BaseModel):
    id: str
    function: CalledFunction


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str = ""
    thinking: str | None = None
    tool_calls: list[ToolCall] | None = None


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class Logprob(TokenLogprob):
    top_logprobs: list[TokenLogprob] | None = None


class Durations(BaseModel):
    """On the last object only. ``load_duration``: waiting for a free slot (Ollama counts its
    scheduler's wait there too); ``prompt_eval_duration``: from then to the first token;
    ``eval_duration``: first to last token. Together at most ``total_duration``."""

    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None


class _ChatHead(BaseModel):
    model: str
    created_at: str = Field(description="RFC 3339, UTC.")
    message: AssistantMessage


class _GenerateHead(BaseModel):
    model: str
    created_at: str = Field(description="RFC 3339, UTC.")
    response: str
    thinking: str | None = None


class _Done(BaseModel):
    done: bool
    done_reason: DoneReason | None = None
    logprobs: list[Logprob] | None = None


# In Ollama's order in the JSON: fields come base by base, the last base first.
class OllamaChatResponse(Durations, _Done, _ChatHead):
    failed_tool_calls: list[FailedToolCall] | None = Field(
        None, description=FAILED_CALLS_DESCRIPTION + " On the last line (`done: true`)."
    )


class OllamaGenerateResponse(Durations, _Done, _GenerateHead):
    pass


# ---- models --------------------------------------------------------------------------------
class ModelDetails(BaseModel):
    parent_model: str = Field("", description="An adapter's base model.")
    format: str = "onnx"
    family: str
    families: list[str]
    parameter_size: str = Field(description='Counted off the ONNX weights, e.g. "135.2M".')
    quantization_level: str = Field(description='"Q4" (int4 weights), "Q8", "F16", "F32"...')


class ListedModel(BaseModel):
    name: str
    model: str
    modified_at: str
    size: int = Field(description="Bytes of the model folder's files.")
    digest: str = Field(description="sha256 of the folder's genai_config.json.")
    details: ModelDetails


class ListResponse(BaseModel):
    models: list[ListedModel]


class RunningModel(BaseModel):
    name: str
    model: str
    size: int
    digest: str
    details: ModelDetails
    expires_at: str = Field(
        description="When it is unloaded if no request comes: its keep-alive after its last "
        "request; far ahead (9999) for one kept loaded."
    )
    size_vram: int = Field(description="The size on a GPU provider, 0 on the CPU.")
    context_length: int


class ProcessResponse(BaseModel):
    models: list[RunningModel]


class ShowResponse(BaseModel):
    license: str = ""
    modelfile: str
    parameters: str
    template: str = Field(description="The model's chat template (Jinja, not Go).")
    details: ModelDetails
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str


class VersionResponse(BaseModel):
    version: str
