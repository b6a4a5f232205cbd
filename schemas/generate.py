"""POST /generate bodies: raw text continued as is (no chat template)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.common import GREEDY_OR_MODEL, SamplingFields


class GenerateRequest(SamplingFields):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"prompt": "Once upon a time", "max_new_tokens": 32}]},
    )

    prompt: str = Field(..., min_length=1, description="Raw text, continued as is.")
    max_new_tokens: int | None = Field(
        None, gt=0, description="Tokens to generate at most; default GENAI_DEFAULT_MAX_TOKENS."
    )
    temperature: float = Field(0.7, ge=0.0, le=2.0, description=GREEDY_OR_MODEL)


class GenerateResponse(BaseModel):
    generated_text: str
    tokens_generated: int
    finish_reason: Literal["stop", "length"] = Field(
        description="`stop`: EOS or a stop string; `length`: max_new_tokens reached."
    )
