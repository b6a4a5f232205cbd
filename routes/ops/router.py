"""Operations: readiness and Prometheus metrics.

``/readyz`` is open like ``/healthz`` (probes); ``/metrics`` sits behind the API key when one
is configured.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from routes.http.deps import ModelsDep
from schemas.ops import Readiness

router = APIRouter()


@router.get(
    "/readyz", response_model=Readiness, responses={503: {"model": Readiness}}, tags=["health"]
)
async def readyz(models: ModelsDep) -> JSONResponse:
    """Readiness: 200 only when the model is loaded and the server is not draining."""
    if models.draining:
        state = "draining"
    else:
        state = {"ok": "ready", "loading": "loading", "error": "error"}[models.status]
    body = Readiness(status=state, scheduler=models.default.strategy_name)
    return JSONResponse(body.model_dump(), 200 if state == "ready" else 503)


@router.get(
    "/metrics",
    response_class=Response,
    tags=["ops"],
    responses={200: {"content": {"text/plain": {}}}},
)
async def metrics(request: Request) -> Response:
    """Prometheus text format."""
    exposition: bytes = request.app.state.metrics.exposition()
    return Response(exposition, media_type="text/plain; version=0.0.4; charset=utf-8")
