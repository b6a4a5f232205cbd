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
from routes.door.fields import FieldNames, client_names
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

# These doors' names for the encoder core's fields, where they differ (for errors): the
# inputs, a pair's parts (the reranker's query and documents; vLLM's text_1 and text_2), and
# the truncation (the token count; ``truncate: true`` is its -1).
_CUT = {"truncate": "truncate_prompt_tokens"}
EMBEDDINGS = FieldNames({"inputs": "input", **_CUT})
RERANK = FieldNames({"pairs": "documents", "document": "documents", **_CUT})
SCORE = FieldNames({"pairs": "text_2", "document": "text_2", "query": "text_1", **_CUT})


def _encoded(vector: Array, encoding: str) -> list[float] | str:
    if encoding == "base64":  # what the openai SDK asks for by default, and decodes
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]


async def embeddings(body: EmbeddingRequest, models: ModelRegistry, rid: str) -> EmbeddingList:
    models.encoder(body.model, "embedding")  # a 404 or 400 before anything loads
    async with models.hold(body.model, "embedding"):  # loaded, and kept until answered
        service = models.encoder(body.model, "embedding")
        request = EmbedRequest(
            body.inputs(),
            model=body.model,
            prompt_name=body.prompt_name,
            input_type=body.input_type,
            dimensions=body.dimensions,
            truncate=body.truncation(),
            request_id=rid,
        )
        with client_names(EMBEDDINGS):
            result = await service.embed(request)
        data = [
            Embedding(index=i, embedding=_encoded(v, body.encoding_format))
            for i, v in enumerate(result.vectors)
        ]
        tokens = result.prompt_tokens
        usage = EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens)
        return EmbeddingList(data=data, model=body.model or service.model_name, usage=usage)


async def rerank(body: RerankRequest, models: ModelRegistry, rid: str) -> RerankResponse:
    models.encoder(body.model, "reranker")  # a 404 or 400 before anything loads
    async with models.hold(body.model, "reranker"):  # loaded, and kept until answered
        service = models.encoder(body.model, "reranker")
        texts = body.texts()
        pairs = [(body.query, t) for t in texts]
        with client_names(RERANK):
            result = await service.score(pairs, body.model, body.truncation(), rid)
        order = sorted(range(len(texts)), key=lambda i: -result.scores[i])[: body.top_n]
        results = [
            RerankResult(
                index=i,
                relevance_score=result.scores[i],
                document=RerankDocument(text=texts[i]) if body.return_documents else None,
            )
            for i in order
        ]
        usage = EmbeddingUsage(
            prompt_tokens=result.prompt_tokens, total_tokens=result.prompt_tokens
        )
        return RerankResponse(
            id=rid or f"rerank-{uuid.uuid4().hex}",
            model=body.model or service.model_name,
            results=results,
            usage=usage,
        )


async def score(body: ScoreRequest, models: ModelRegistry, rid: str) -> ScoreResponse:
    models.encoder(body.model, "reranker")  # a 404 or 400 before anything loads
    async with models.hold(body.model, "reranker"):  # loaded, and kept until answered
        service = models.encoder(body.model, "reranker")
        with client_names(SCORE):
            result = await service.score(body.pairs(), body.model, body.truncation(), rid)
        usage = EmbeddingUsage(
            prompt_tokens=result.prompt_tokens, total_tokens=result.prompt_tokens
        )
        return ScoreResponse(
            id=rid or f"score-{uuid.uuid4().hex}",
            created=int(time.time()),
            model=body.model or service.model_name,
            data=[ScoreData(index=i, score=s) for i, s in enumerate(result.scores)],
            usage=usage,
        )
