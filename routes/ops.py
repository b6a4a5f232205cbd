"""Operations: readiness, Prometheus metrics, and admin actions (cancel, ORT profiling).

``/readyz`` is open like ``/healthz`` (probes); ``/metrics`` and ``/admin/*`` sit behind the
API key when one is configured.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from backends.errors import GenAIError, InvalidRequest
from routes.deps import ERROR_RESPONSES, ServiceDep, SettingsDep

router = APIRouter()


class Readiness(BaseModel):
    status: Literal["ready", "loading", "draining", "error"]
    scheduler: str | None = None


class InflightRequest(BaseModel):
    id: str
    state: Literal["running", "waiting"]
    prompt_tokens: int
    generated_tokens: int
    age_seconds: float


class InflightList(BaseModel):
    data: list[InflightRequest]


class CancelResult(BaseModel):
    id: str
    cancelled: bool


class ProfilingRequest(BaseModel):
    enabled: bool = Field(description="true: write one ORT profile JSON per model step")


class ProfilingState(BaseModel):
    enabled: bool
    directory: str
    prefix: str | None = None
    kept_files: int


class RequestNotFound(GenAIError):
    status_code = 404
    error_type = "invalid_request_error"
    code = "request_not_found"


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
    running = set(service.scheduler.active_job_ids())
    now = time.perf_counter()
    return InflightList(
        data=[
            InflightRequest(
                id=gen.id,
                state="running" if gen.id in running else "waiting",
                prompt_tokens=len(gen.prompt),
                generated_tokens=gen.job.generated if gen.job else 0,
                age_seconds=now - gen.timer.accepted,
            )
            for gen in list(service.inflight.values())
        ]
    )


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
    body: ProfilingRequest, service: ServiceDep, settings: SettingsDep, request: Request
) -> ProfilingState:
    """Turn onnxruntime profiling on or off for the model's steps (generator scheduler).

    Files go to ``GENAI_PROFILE_DIR``; beyond ``GENAI_PROFILE_MAX_FILES`` the oldest are
    deleted at every toggle."""
    directory = settings.profile_dir.resolve()
    prefix = str(directory / "ort") if body.enabled else None
    if body.enabled:
        directory.mkdir(parents=True, exist_ok=True)
    try:
        await service.set_profiling(prefix)
    except NotImplementedError as exc:
        raise InvalidRequest(str(exc), param="enabled") from None
    request.app.state.profiling = prefix
    kept = _prune(directory, settings.profile_max_files) if directory.exists() else 0
    return ProfilingState(
        enabled=body.enabled, directory=str(directory), prefix=prefix, kept_files=kept
    )
