"""The FastAPI app: ``create_app(settings)``, its lifespan and the routers it mounts.

The models are loaded in the lifespan (never at import), each by its own
:class:`InferenceService`, all kept in a :class:`ModelRegistry` on ``app.state``; routes reach
it through the ``ModelsDep`` dependency (routes/http/deps.py). The stored Responses
(routes/responses/store.py) live on ``app.state.responses``, closed when the lifespan ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from backends.config import service_configs
from backends.core.model_service import ModelService
from backends.core.registry import ModelRegistry
from backends.engine.kv_events import KVEventPublisher, host_address
from backends.models.hub import resolve_all
from config.models_file import served_model_fields
from config.settings import Settings
from metrics.kv_events import KVEventCollector
from metrics.prometheus import ServerMetrics
from metrics.responses_store import ResponseStoreCollector
from routes.anthropic import router as anthropic
from routes.audio import router as audio
from routes.embeddings import router as embeddings
from routes.http.auth import install_auth_and_cors
from routes.http.body_limit import BodyLimitMiddleware
from routes.http.errors import install_error_handlers
from routes.http.memory import TrimWhenIdle, limit_arenas
from routes.http.request_ids import RequestIdMiddleware
from routes.http.sse import document_event_schemas
from routes.native import generate
from routes.native import router as native
from routes.ollama import router as ollama
from routes.openai import router as openai
from routes.ops import admin, requests
from routes.ops import router as ops
from routes.responses import router as responses
from routes.responses.state import open_store
from routes.tokenizer import router as tokenizer
from routes.web import mount_page
from schemas.audio import TranscriptTextDelta, TranscriptTextDone
from schemas.native import StreamDone, StreamToken
from schemas.openai import ChatCompletionChunk, Completion
from schemas.responses import RESPONSE_STREAM_EVENTS

log = logging.getLogger("genai.app")

MIB = 1024 * 1024

# What the streaming routes send, one JSON object per event (documented in OpenAPI).
STREAM_EVENTS = (
    ChatCompletionChunk,
    Completion,
    StreamToken,
    StreamDone,
    *RESPONSE_STREAM_EVENTS,
    TranscriptTextDelta,
    TranscriptTextDone,
)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    models: ModelRegistry = app.state.models
    server = app.state.settings.server
    if server.workers > 1 and server.responses_db is None:
        log.warning(
            "%d workers each keep their own stored Responses in memory: a previous_response_id "
            "made by one is unknown to the others; set GENAI_RESPONSES_DB to share them",
            server.workers,
        )

    async def load() -> None:
        try:
            await models.start()
        except Exception:  # /healthz reports "error"; the registry logged why
            pass

    kv_events: KVEventPublisher | None = app.state.kv_events
    if kv_events is not None:
        kv_events.start()  # before the models: they publish from their first step
    # Load in the background so /healthz can answer "loading" meanwhile.
    loading = asyncio.create_task(load())
    try:
        yield
    finally:
        if not loading.done():
            loading.cancel()
        await models.stop()
        app.state.responses.close()
        if kv_events is not None:
            kv_events.close()  # after the models' last AllBlocksCleared


def kv_event_publisher(settings: Settings) -> KVEventPublisher | None:
    """The KV-event publisher GENAI_KV_EVENTS_ENDPOINT asks for (its socket opens in the
    lifespan), each model on its own topic."""
    server = settings.server
    if not server.kv_events_endpoint:
        return None
    host = host_address() if not server.pod_ip else server.pod_ip
    where = server.kv_events_socket()
    return KVEventPublisher(
        where.address,
        where.bind,
        lambda model: server.kv_events_topic_for(model, host),
        shown=server.kv_events_endpoint,
    )


def create_app(
    settings: Settings | None = None, models: ModelService | ModelRegistry | None = None
) -> FastAPI:
    """The app for ``settings``; ``models`` (a model's core, or several) replaces the
    models the settings name (tests)."""
    settings = settings or Settings.load()
    app = FastAPI(
        title="ONNX Runtime GenAI server",
        version="0.1.0",
        description="Serves onnxruntime-genai models over HTTP, with per-request timing.",
        lifespan=lifespan,
    )
    metrics = ServerMetrics()
    kv_events = kv_event_publisher(settings)
    if isinstance(models, ModelService):
        models = ModelRegistry([models], metrics)
    elif models is None:
        configs = service_configs(served_model_fields(settings), settings.server.limits())
        models = ModelRegistry.from_configs(
            resolve_all(configs), metrics, kv_events, max_loaded=settings.server.max_models
        )
    app.state.settings = settings
    app.state.kv_events = kv_events
    app.state.models = models
    app.state.metrics = metrics
    app.state.responses = open_store(settings.server)  # closed when the lifespan ends
    metrics.registry.register(ResponseStoreCollector(app.state.responses))
    if kv_events is not None:
        metrics.registry.register(KVEventCollector(kv_events))
    install_error_handlers(app)
    app.include_router(native.router)
    app.include_router(ops.router)
    app.include_router(admin.router)
    app.include_router(requests.router)
    app.include_router(openai.router)
    app.include_router(responses.router)
    app.include_router(generate.router)
    app.include_router(tokenizer.router)
    app.include_router(audio.router)
    app.include_router(embeddings.router)
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
    ollama.install(app, web_ui=settings.server.web_ui)  # the same, for /api/*
    app.add_middleware(RequestIdMiddleware)  # 401s and CORS answers get an id too
    app.add_middleware(TrimWhenIdle)  # outermost: it sees every request end, refused ones too
    limit_arenas()  # before the models' threads start (their loading is the lifespan's)
    return app
