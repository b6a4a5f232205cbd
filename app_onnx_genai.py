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

from backends.service import InferenceService
from metrics.prometheus import ServerMetrics
from routes import generate, openai, ops, seed
from routes.auth import install_auth_and_cors
from routes.errors import install_error_handlers
from routes.middleware import RequestIdMiddleware
from schemas.settings import Settings

log = logging.getLogger("genai.app")


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
    settings = settings or Settings()
    app = FastAPI(
        title="ONNX Runtime GenAI server",
        version="0.1.0",
        description="Serves an onnxruntime-genai model over HTTP, with per-request timing.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.service = service or InferenceService(settings.service_config())
    app.state.metrics = ServerMetrics(
        running=lambda: app.state.service.scheduler.active_count,
        waiting=lambda: app.state.service.scheduler.waiting_count,
    )
    app.state.service.observer = app.state.metrics
    install_error_handlers(app)
    app.include_router(seed.router)
    app.include_router(ops.router)
    app.include_router(openai.router)
    app.include_router(generate.router)
    app.openapi = openai.document_stream_chunks(app)  # type: ignore[method-assign]
    install_auth_and_cors(app, settings)
    app.add_middleware(RequestIdMiddleware)  # outermost: 401s and CORS answers get an id too
    return app
