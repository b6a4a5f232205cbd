"""What the encoder doors answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(
        ..., description="The vector, or its little-endian float32 bytes in base64."
    )


class EmbeddingList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


class RerankDocument(BaseModel):
    text: str


class RerankResult(BaseModel):
    index: int = Field(..., description="The document's place in the request.")
    relevance_score: float = Field(..., description="sigmoid(logit): 0..1, higher is closer.")
    document: RerankDocument | None = None


class RerankResponse(BaseModel):
    id: str
    model: str
    results: list[RerankResult] = Field(..., description="Best first.")
    usage: EmbeddingUsage


class ScoreData(BaseModel):
    index: int
    object: Literal["score"] = "score"
    score: float


class ScoreResponse(BaseModel):
    id: str
    object: Literal["list"] = "list"
    created: int
    model: str
    data: list[ScoreData]
    usage: EmbeddingUsage
