"""Operations: readiness, Prometheus metrics, and admin actions (cancel, ORT profiling).

``/readyz`` is open like ``/healthz`` (probes); ``/metrics`` and ``/admin/*`` sit behind the
API key when one is configured.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backends.errors import InvalidRequest, RequestNotFound
from routes.deps import ERROR_RESPONSES, ServiceDep, SettingsDep
from schemas.ops import (
    CancelResult,
    InflightList,
    InflightRequest,
    ProfilingRequest,
    ProfilingState,
    Readiness,
)

router = APIRouter()


@router.get(
    "/readyz", response_model=Readiness, responses={503: {"model": Readiness}}, tags=["health"]
)
async def readyz(service: ServiceDep) -> JSONResponse:
    """Readiness: 200 only when the model is loaded and the server is not draining."""
    if service.draining:
        state = "draining"
    else:
        state = {"ok": "ready", "loading": "loading", "error": "error"}[service.status]
    body = Readiness(status=state, scheduler=service.strategy_name)
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


@router.get("/admin/requests", response_model=InflightList, tags=["admin"])
async def list_requests(service: ServiceDep) -> InflightList:
    stats = service.stats()
    return InflightList(data=[InflightRequest(**asdict(r)) for r in stats.requests])


@router.post(
    "/admin/requests/{request_id}/cancel",
    response_model=CancelResult,
    responses=ERROR_RESPONSES,
    tags=["admin"],
)
async def cancel_request(request_id: str, service: ServiceDep) -> CancelResult:
    """Terminate a running or waiting request; it finishes with reason ``cancelled``."""
    if not service.cancel(request_id):
        raise RequestNotFound(
            f"No request {request_id!r} is running or waiting.", param="request_id"
        )
    return CancelResult(id=request_id, cancelled=True)


def _prune(directory: Path, keep: int) -> int:
    files = sorted(directory.glob("ort_*.json"), key=lambda p: p.stat().st_mtime)
    for old in files[: max(0, len(files) - keep)]:
        old.unlink(missing_ok=True)
    return min(len(files), keep)


@router.post(
    "/admin/profiling", response_model=ProfilingState, responses=ERROR_RESPONSES, tags=["admin"]
)
async def profiling(
    body: ProfilingRequest, service: ServiceDep, settings: SettingsDep
) -> ProfilingState:
    """Turn onnxruntime profiling on or off for the model's steps (generator scheduler).

    Files go to ``GENAI_PROFILE_DIR``; beyond ``GENAI_PROFILE_MAX_FILES`` the oldest are
    deleted at every toggle."""
    directory = settings.server.profile_dir.resolve()
    prefix = str(directory / "ort") if body.enabled else None
    if body.enabled:
        directory.mkdir(parents=True, exist_ok=True)
    try:
        await service.set_profiling(prefix)
    except NotImplementedError as exc:
        raise InvalidRequest(str(exc), param="enabled") from None
    kept = _prune(directory, settings.server.profile_max_files) if directory.exists() else 0
    return ProfilingState(
        enabled=body.enabled, directory=str(directory), prefix=prefix, kept_files=kept
    )
