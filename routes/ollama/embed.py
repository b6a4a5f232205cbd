"""Ollama's /api/embed and the older /api/embeddings over the encoder core, free of FastAPI:
a body to an EmbedRequest, the result to Ollama's answer. A generator (or reranker) named here
is the core's 400 naming its kind."""

from __future__ import annotations

import time

import numpy as np

from backends.core.encoder_service import EmbedRequest as CoreRequest
from backends.core.registry import ModelRegistry
from backends.engine.encoder.pooling import Array
from backends.errors import InvalidRequest
from routes.door.fields import FieldNames, client_names
from schemas.ollama import EmbeddingsRequest, EmbeddingsResponse, EmbedRequest, EmbedResponse
from schemas.ollama.request import keep_alive_seconds

# The two routes' names for the encoder core's fields, where they differ (for errors): the
# older route's one text is its prompt, and it has no truncation to ask for.
EMBED = FieldNames({"inputs": "input"})
EMBEDDINGS = FieldNames({"inputs": "prompt", "truncate": ""})


def _truncation(body: EmbedRequest, max_length: int | None) -> int | None:
    """The core's ``truncate``: None (an over-long input is a 400), -1 (the model's limit) or
    ``num_ctx``, which may not exceed the model's context."""
    num_ctx = body.num_ctx
    if num_ctx is not None and max_length is not None and num_ctx > max_length:
        raise InvalidRequest(
            f"options.num_ctx ({num_ctx}) is more than the {max_length} tokens "
            f"{body.model!r} holds.",
            param="options.num_ctx",
        )
    if not body.truncate:
        return None
    return num_ctx if num_ctx is not None else -1


def _unit(vector: Array) -> list[float]:
    """L2-normalised, as Ollama answers /api/embed (a no-op for a model that normalises)."""
    norm = float(np.linalg.norm(vector))
    return [float(x) / norm for x in vector] if norm > 0 else [float(x) for x in vector]


async def embed(body: EmbedRequest, models: ModelRegistry, rid: str) -> EmbedResponse:
    started = time.perf_counter()
    keep = keep_alive_seconds(body.keep_alive)
    models.encoder(body.model, "embedding")  # a 404 or 400 before anything loads
    async with models.hold(body.model, "embedding", keep):  # loaded until answered
        service = models.encoder(body.model, "embedding")
        inputs = body.inputs()
        truncate = _truncation(body, service.max_length)
        if not inputs:  # Ollama's way to load a model (it is loaded)
            return EmbedResponse(model=body.model, embeddings=[])
        request = CoreRequest(
            inputs, model=body.model, dimensions=body.dimensions, truncate=truncate, request_id=rid
        )
        with client_names(EMBED):
            result = await service.embed(request)
        return EmbedResponse(
            model=body.model,
            embeddings=[_unit(v) for v in result.vectors],
            total_duration=max(int((time.perf_counter() - started) * 1e9), 0),
            load_duration=0,
            prompt_eval_count=result.prompt_tokens,
        )


async def embeddings(
    body: EmbeddingsRequest, models: ModelRegistry, rid: str
) -> EmbeddingsResponse:
    keep = keep_alive_seconds(body.keep_alive)
    models.encoder(body.model, "embedding")  # a 404 or 400 before anything loads
    async with models.hold(body.model, "embedding", keep):  # loaded until answered
        service = models.encoder(body.model, "embedding")
        if body.num_ctx is not None and service.max_length and body.num_ctx > service.max_length:
            raise InvalidRequest(
                f"options.num_ctx ({body.num_ctx}) is more than the {service.max_length} tokens "
                f"{body.model!r} holds.",
                param="options.num_ctx",
            )
        if not body.prompt:
            return EmbeddingsResponse(embedding=[])
        with client_names(EMBEDDINGS):
            result = await service.embed(
                CoreRequest([body.prompt], model=body.model, request_id=rid)
            )
        return EmbeddingsResponse(embedding=[float(x) for x in result.vectors[0]])
