"""The encoder doors over the core, FastAPI-free: a body to an encoder request, its result to
the wire shape."""

from __future__ import annotations

import base64
import time
import uuid

import numpy as np

from backends.core.encoder_service import EmbedRequest
from backends.core.registry import ModelRegistry
from backends.engine.encoder.pooling import Array
from schemas.embeddings import (
    Embedding,
    EmbeddingList,
    EmbeddingRequest,
    EmbeddingUsage,
    RerankDocument,
    RerankRequest,
    RerankResponse,
    RerankResult,
    ScoreData,
    ScoreRequest,
    ScoreResponse,
)


def _encoded(vector: Array, encoding: str) -> list[float] | str:
    if encoding == "base64":  # what the openai SDK asks for by default, and decodes
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]


async def embeddings(body: EmbeddingRequest, models: ModelRegistry, rid: str) -> EmbeddingList:
    service = models.encoder(body.model, "embedding")
    result = await service.embed(
        EmbedRequest(
            body.inputs(),
            model=body.model,
            prompt_name=body.prompt_name,
            input_type=body.input_type,
            dimensions=body.dimensions,
            truncate=body.truncation(),
            request_id=rid,
        )
    )
    data = [
        Embedding(index=i, embedding=_encoded(v, body.encoding_format))
        for i, v in enumerate(result.vectors)
    ]
    tokens = result.prompt_tokens
    usage = EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens)
    return EmbeddingList(data=data, model=body.model or service.model_name, usage=usage)


async def rerank(body: RerankRequest, models: ModelRegistry, rid: str) -> RerankResponse:
    service = models.encoder(body.model, "reranker")
    texts = body.texts()
    result = await service.score(
        [(body.query, t) for t in texts], body.model, body.truncation(), rid
    )
    order = sorted(range(len(texts)), key=lambda i: -result.scores[i])[: body.top_n]
    results = [
        RerankResult(
            index=i,
            relevance_score=result.scores[i],
            document=RerankDocument(text=texts[i]) if body.return_documents else None,
        )
        for i in order
    ]
    usage = EmbeddingUsage(prompt_tokens=result.prompt_tokens, total_tokens=result.prompt_tokens)
    return RerankResponse(
        id=rid or f"rerank-{uuid.uuid4().hex}",
        model=body.model or service.model_name,
        results=results,
        usage=usage,
    )


async def score(body: ScoreRequest, models: ModelRegistry, rid: str) -> ScoreResponse:
    service = models.encoder(body.model, "reranker")
    result = await service.score(body.pairs(), body.model, body.truncation(), rid)
    usage = EmbeddingUsage(prompt_tokens=result.prompt_tokens, total_tokens=result.prompt_tokens)
    return ScoreResponse(
        id=rid or f"score-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=body.model or service.model_name,
        data=[ScoreData(index=i, score=s) for i, s in enumerate(result.scores)],
        usage=usage,
    )
