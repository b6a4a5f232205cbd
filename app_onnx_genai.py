"""The FastAPI app: ``create_app(settings)``, its lifespan and the routers it mounts.

The model is loaded in the lifespan (never at import) by an :class:`InferenceService` kept on
``app.state``; routes reach it through the ``ServiceDep`` dependency (routes/deps.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.service import InferenceService
from metrics.prometheus import ServerMetrics
from routes import admin, anthropic, generate, native, openai, ops, responses, tokenizer
from routes.auth import install_auth_and_cors
from routes.body_limit import BodyLimitMiddleware
from routes.errors import install_error_handlers
from routes.middleware import RequestIdMiddleware
from routes.sse import document_event_schemas
from routes.web import mount_page
from schemas.native import StreamDone, StreamToken
from schemas.openai import ChatCompletionChunk, Completion
from schemas.responses import RESPONSE_STREAM_EVENTS
from schemas.settings import Settings

log = logging.getLogger("genai.app")

MIB = 1024 * 1024

# What the streaming routes send, one JSON object per event (documented in OpenAPI).
STREAM_EVENTS = (ChatCompletionChunk, Completion, StreamToken, StreamDone, *RESPONSE_STREAM_EVENTS)


def service_config(settings: Settings) -> ServiceConfig:
    """The backend's configuration, from the model settings and the server's limits."""
    model, server = settings.model, settings.server
    return ServiceConfig(
        model=ModelConfig(
            path=model.model_dir,
            name=model.model_name,
            device=model.device,
            variant=model.model_variant,
            intra_op_threads=model.intra_op_threads,
            max_length=model.max_length,
            scheduler=model.scheduler,
            prefill_chunk=model.prefill_chunk,
            cache_sequences=model.cache_sequences,
            kv_cache_mib=model.kv_cache_mib,
            tool_parser=model.tool_parser,
            reasoning_parser=model.reasoning_parser,
        ),
        limits=Limits(
            max_concurrency=server.max_concurrency,
            max_queue=server.max_queue,
            request_timeout=server.request_timeout,
            default_max_tokens=server.default_max_tokens,
        ),
    )


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    service: InferenceService = app.state.service

    async def load() -> None:
        try:
            await service.start()
            log.info("model ready: %s on %s", service.model_dir, service.device)
        except Exception as exc:  # /healthz reports "error"; the message is in the log
            log.error("model failed to load: %s", exc)

    # Load in the background so /healthz can answer "loading" meanwhile.
    loading = asyncio.create_task(load())
    try:
        yield
    finally:
        if not loading.done():
            loading.cancel()
        await service.stop()


def create_app(
    settings: Settings | None = None, service: InferenceService | None = None
) -> FastAPI:
    settings = settings or Settings.load()
    app = FastAPI(
        title="ONNX Runtime GenAI server",
        version="0.1.0",
        description="Serves an onnxruntime-genai model over HTTP, with per-request timing.",
        lifespan=lifespan,
    )
    service = service or InferenceService(service_config(settings))
    metrics = ServerMetrics(
        running=lambda: service.stats().running, waiting=lambda: service.stats().waiting
    )
    service.observer = metrics
    app.state.settings = settings
    app.state.service = service
    app.state.metrics = metrics
    install_error_handlers(app)
    app.include_router(native.router)
    app.include_router(ops.router)
    app.include_router(admin.router)
    app.include_router(openai.router)
    app.include_router(responses.router)
    app.include_router(generate.router)
    app.include_router(tokenizer.router)
    app.openapi = document_event_schemas(app, STREAM_EVENTS)  # type: ignore[method-assign]
    if settings.server.web_ui:
        mount_page(app)  # the playground at /: its own paths only
    install_auth_and_cors(app, settings.server)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=int(settings.server.max_body_mib * MIB),
        timeout=settings.server.client_timeout,
    )
    anthropic.install(app)  # its routes, and its error shape around auth and the body limits
    app.add_middleware(RequestIdMiddleware)  # outermost: 401s and CORS answers get an id too
    return app
