"""The seed API's bodies: /healthz, /v1/chat, /v1/chat/stream."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str


class ChatRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}]
        },
    )

    model: str | None = Field(None, description="Served model name; omit for the default.")
    messages: list[ChatMessage] = Field(..., min_length=1)
    temperature: float = Field(0.7, ge=0.0, le=2.0, description="0 means greedy decoding.")
    max_tokens: int | None = Field(
        None, gt=0, description="Tokens to generate at most; default GENAI_DEFAULT_MAX_TOKENS."
    )
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, description="0 disables the top-k cut.")


class ChatMetrics(BaseModel):
    ttft: float = Field(description="Seconds from request accepted to first output token.")
    total_latency: float = Field(description="Seconds from request accepted to the end.")
    tokens_per_second: float = Field(description="Decode speed: 1 / tpot.")
    output_tokens_per_second: float = Field(description="output_tokens / total_latency.")
    input_tokens: int
    output_tokens: int
    tpot: float = Field(description="(t_last - t_first) / (output_tokens - 1), seconds.")
    model: str


class ChatResponse(BaseModel):
    content: str
    metrics: ChatMetrics


class StreamToken(BaseModel):
    token: str


class StreamDone(BaseModel):
    done: Literal[True] = True
    token: Literal["[DONE]"] = "[DONE]"
    metrics: ChatMetrics


class Health(BaseModel):
    status: Literal["ok", "loading", "error"]
    backend: Literal["onnx-genai"] = "onnx-genai"
    device: str
    model_dir: str
