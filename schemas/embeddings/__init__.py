"""Embeddings (OpenAI's /v1/embeddings), reranking (the Cohere/Jina shape that llama-server and
vLLM accept at /v1/rerank) and vLLM's /v1/score pairs."""

from schemas.embeddings.request import EmbeddingRequest, RerankRequest, ScoreRequest
from schemas.embeddings.response import (
    Embedding,
    EmbeddingList,
    EmbeddingUsage,
    RerankDocument,
    RerankResponse,
    RerankResult,
    ScoreData,
    ScoreResponse,
)

__all__ = [
    "Embedding",
    "EmbeddingList",
    "EmbeddingRequest",
    "EmbeddingUsage",
    "RerankDocument",
    "RerankRequest",
    "RerankResponse",
    "RerankResult",
    "ScoreData",
    "ScoreRequest",
    "ScoreResponse",
]
