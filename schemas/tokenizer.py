"""Bodies of the tokenizer routes (the names vLLM and llama-server use)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel
from schemas.openai import OpenAIChatMessage, ToolDefinition


class ChatInput(RequestModel):
    model: str | None = Field(None, description="The served model name; omit for the default.")
    messages: list[OpenAIChatMessage] | None = Field(
        None, description="A chat, rendered with the model's template (give this or `prompt`)."
    )
    tools: list[ToolDefinition] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class TokenizeRequest(ChatInput):
    prompt: str | None = Field(None, description="Raw text, tokenized as it is.")

    @model_validator(mode="after")
    def _one_input(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise PydanticCustomError("one_input", "give either prompt or messages")
        return self


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int | None
    tokens: list[int]


class DetokenizeRequest(RequestModel):
    model: str | None = None
    tokens: list[int] = Field(..., max_length=1_000_000)


class DetokenizeResponse(BaseModel):
    prompt: str


class ApplyTemplateRequest(ChatInput):
    messages: list[OpenAIChatMessage] = Field(..., min_length=1)


class ApplyTemplateResponse(BaseModel):
    prompt: str
