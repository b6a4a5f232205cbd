"""Admin actions: list and cancel requests, a bounded onnxruntime profiling window.

Off unless an API key is set (then they sit behind it) or GENAI_ADMIN=true: the container
binds 0.0.0.0, and these routes can cancel anyone's request and write files.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from fastapi import APIRouter, Depends

from backends.config import service_config
from backends.engine.profiling import ProfileWindow
from backends.errors import GenAIError, InvalidRequest, RequestNotFound, StartupError
from config.models_file import ModelEntry, model_fields
from routes.http.deps import ERROR_RESPONSES, ModelsDep, SettingsDep
from schemas.errors import ErrorResponse
from schemas.ops import (
    CancelResult,
    InflightList,
    InflightRequest,
    ModelState,
    ProfilingRequest,
    ProfilingState,
    UnloadResult,
)


# Here rather than in schemas/ops.py: schemas/ knows no configuration.
class LoadModelRequest(ModelEntry):
    """A model to load at runtime: a models-file entry (paths relative to the server's
    working directory)."""


class AdminDisabled(GenAIError):
    status_code = 403
    error_type = "permission_error"
    code = "admin_disabled"


def require_admin(settings: SettingsDep) -> None:
    if not settings.server.admin_enabled:
        raise AdminDisabled(
            "The admin routes are off: set GENAI_API_KEY (they then need the key) or "
            "GENAI_ADMIN=true to turn them on."
        )


router = APIRouter(
    prefix="/admin",
    tags=["admin"],
    dependencies=[Depends(require_admin)],
    responses={
        401: ERROR_RESPONSES[401],
        403: {"model": ErrorResponse, "description": "The admin routes are off"},
    },
)


@router.get("/requests", response_model=InflightList)
async def list_requests(models: ModelsDep) -> InflightList:
    stats = models.stats()
    return InflightList(data=[InflightRequest(**asdict(r)) for r in stats.requests])


@router.post(
    "/requests/{request_id}/cancel", response_model=CancelResult, responses=ERROR_RESPONSES
)
async def cancel_request(request_id: str, models: ModelsDep) -> CancelResult:
    """Terminate a running or waiting request; it finishes with reason ``cancelled``."""
    if not models.cancel(request_id):
        raise RequestNotFound(
            f"No request {request_id!r} is running or waiting.", param="request_id"
        )
    return CancelResult(id=request_id, cancelled=True)


@router.post("/profiling", response_model=ProfilingState, responses=ERROR_RESPONSES)
async def profiling(
    body: ProfilingRequest, models: ModelsDep, settings: SettingsDep
) -> ProfilingState:
    """onnxruntime profiling of the next ``steps`` model steps (generator and batch
    schedulers), then off by itself; or off now.

    Files go to ``GENAI_PROFILE_DIR``; beyond ``GENAI_PROFILE_MAX_FILES`` the oldest are
    deleted as new ones are written."""
    server = settings.server
    directory = server.profile_dir.resolve()
    if body.enabled:
        directory.mkdir(parents=True, exist_ok=True)
        window = ProfileWindow(directory, body.steps, server.profile_max_files)
        try:
            await models.get(body.model).start_profiling(window)
        except NotImplementedError as exc:
            raise InvalidRequest(str(exc), param="enabled") from None
        kept = window.prune()
    else:
        kept = await models.get(body.model).stop_profiling()
    return ProfilingState(
        enabled=body.enabled,
        directory=str(directory),
        steps_left=models.get(body.model).profiling_steps_left,
        kept_files=kept,
    )


@router.post("/models", response_model=ModelState, responses=ERROR_RESPONSES)
async def load_model(
    body: LoadModelRequest, models: ModelsDep, settings: SettingsDep
) -> ModelState:
    """Load a model (with the start-up checks of a model at boot) and serve it under
    ``name``; its unset fields take the server's model settings."""
    entry = body.resolved(Path.cwd())
    config = service_config(model_fields(settings.model, entry), settings.server.limits())
    try:
        loaded = await models.load(config)
    except StartupError as exc:
        raise InvalidRequest(str(exc), param="path") from None
    return ModelState(
        id=loaded.model_name,
        status=loaded.status,
        device=loaded.device,
        max_model_len=loaded.max_length,
        adapters=list(loaded.adapter_names),
    )


@router.delete("/models/{name}", response_model=UnloadResult, responses=ERROR_RESPONSES)
async def unload_model(name: str, models: ModelsDep, settings: SettingsDep) -> UnloadResult:
    """Stop serving model ``name``: new requests get 404 at once; its running requests get
    ``GENAI_SHUTDOWN_TIMEOUT`` seconds to finish, then are cancelled."""
    cancelled = await models.unload(name, settings.server.shutdown_timeout)
    return UnloadResult(id=name, unloaded=True, cancelled=cancelled)
