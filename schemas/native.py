"""The native API's bodies: /healthz, /v1/chat and /v1/chat/stream (the original API)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.common import GREEDY_OR_MODEL, ChatMessage, SamplingFields, TimingMetrics


class ChatRequest(SamplingFields):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}]
        },
    )

    messages: list[ChatMessage] = Field(..., min_length=1)
    temperature: float = Field(0.7, ge=0.0, le=2.0, description=GREEDY_OR_MODEL)
    max_tokens: int | None = Field(
        None, gt=0, description="Tokens to generate at most; default GENAI_DEFAULT_MAX_TOKENS."
    )


class ChatResponse(BaseModel):
    content: str
    metrics: TimingMetrics


class StreamToken(BaseModel):
    token: str


class StreamDone(BaseModel):
    done: Literal[True] = True
    token: Literal["[DONE]"] = "[DONE]"
    metrics: TimingMetrics


class Health(BaseModel):
    status: Literal["ok", "loading", "error"]
    backend: Literal["onnx-genai"] = "onnx-genai"
    device: str
    model_dir: str | None = Field(
        None,
        description="The default model's folder: only for a caller that sends a valid API key "
        "(the route is open; a path on the host is not for anyone who asks).",
    )
    models: dict[str, Literal["ok", "loading", "error", "unloaded"]] = Field(
        default_factory=dict,
        description="Every served model's status (the first: default); unloaded: not in "
        "memory, loaded by its first request.",
    )
    modalities: dict[str, list[str]] = Field(
        default_factory=dict,
        description="What each loaded model reads: text, and image or audio where it can.",
    )
    kinds: dict[str, Literal["generator", "embedding", "reranker", "transcription"]] = Field(
        default_factory=dict, description="Every served model's kind."
    )
