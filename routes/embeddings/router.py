"""Routes of the encoder doors; thin: validate, call serving, answer JSON. A client that leaves
cancels its inputs not yet run."""

from __future__ import annotations

from fastapi import APIRouter, Request

from routes.embeddings import serving
from routes.http.cancellation import unless_disconnected
from routes.http.deps import ERROR_RESPONSES, ModelsDep
from routes.http.request_ids import request_id
from schemas.embeddings import (
    EmbeddingList,
    EmbeddingRequest,
    RerankRequest,
    RerankResponse,
    ScoreRequest,
    ScoreResponse,
)

router = APIRouter(tags=["embeddings"])


@router.post("/v1/embeddings", response_model=EmbeddingList, responses=ERROR_RESPONSES)
async def embeddings(body: EmbeddingRequest, models: ModelsDep, request: Request) -> EmbeddingList:
    """OpenAI's embeddings: float or base64 vectors, ``dimensions``, usage."""
    work = serving.embeddings(body, models, request_id(request))
    return await unless_disconnected(request, work)


@router.post("/v1/rerank", response_model=RerankResponse, responses=ERROR_RESPONSES)
@router.post("/rerank", response_model=RerankResponse, include_in_schema=False)
@router.post("/v2/rerank", response_model=RerankResponse, include_in_schema=False)
async def rerank(body: RerankRequest, models: ModelsDep, request: Request) -> RerankResponse:
    """Documents ranked against a query by a cross-encoder (Cohere / Jina shape), best first."""
    work = serving.rerank(body, models, request_id(request))
    return await unless_disconnected(request, work)


@router.post("/v1/score", response_model=ScoreResponse, responses=ERROR_RESPONSES)
@router.post("/score", response_model=ScoreResponse, include_in_schema=False)
async def score(body: ScoreRequest, models: ModelsDep, request: Request) -> ScoreResponse:
    """vLLM's score: text_1 against each text_2 (or paired by index)."""
    work = serving.score(body, models, request_id(request))
    return await unless_disconnected(request, work)
