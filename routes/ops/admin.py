"""Admin actions: list and cancel anyone's requests, a bounded onnxruntime profiling window,
load and unload models.

Off unless a key is set or GENAI_ADMIN=true: the container binds 0.0.0.0, and these routes can
cancel anyone's request and write files. With keys, only an admin key (GENAI_ADMIN_API_KEY)
gets in; a user key (GENAI_API_KEY) gets 403, and lists and cancels its own requests on
/v1/requests (routes/ops/requests.py) instead. Models load from under GENAI_MODEL_ROOT alone,
and every path refused there gets the one same answer, so that the route tells nothing of
what else stands on the host.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends, Request
from pydantic import field_validator

from backends.config import MAX_NAME_CHARS, service_config
from backends.engine.profiling import ProfileWindow
from backends.errors import GenAIError, InvalidRequest, StartupError
from config.models_file import ModelEntry, model_fields
from config.settings import ServerSettings
from routes.http.auth import is_admin
from routes.http.deps import ERROR_RESPONSES, ModelsDep, SettingsDep
from routes.ops.requests import cancel_owned, listed
from schemas.errors import ErrorResponse
from schemas.ops import (
    CancelResult,
    InflightList,
    ModelState,
    ProfilingRequest,
    ProfilingState,
    UnloadResult,
)


# Here rather than in schemas/ops.py: schemas/ knows no configuration.
class LoadModelRequest(ModelEntry):
    """A model to load at runtime: a models-file entry, its paths under the server's model
    root (GENAI_MODEL_ROOT; relative ones are taken under it)."""

    @field_validator("adapters", mode="after")
    @classmethod
    def _short_adapter_names(cls, adapters: dict[str, Path]) -> dict[str, Path]:
        # The model's own name is held to MAX_NAME_CHARS by its type (backends/config.py).
        for name in adapters:
            if not 0 < len(name) <= MAX_NAME_CHARS:
                raise ValueError(f"an adapter's name must be 1 to {MAX_NAME_CHARS} characters")
        return adapters


class AdminDisabled(GenAIError):
    status_code = 403
    error_type = "permission_error"
    code = "admin_disabled"


class AdminKeyRequired(GenAIError):
    status_code = 403
    error_type = "permission_error"
    code = "admin_key_required"


class LoadingDisabled(GenAIError):
    status_code = 403
    error_type = "permission_error"
    code = "model_loading_disabled"


class TooManyModels(InvalidRequest):
    code = "too_many_models"


# One answer for every path refused: outside the root, missing, not a folder, not a model's.
NOT_UNDER_ROOT = (
    "No model folder there under the server's model root (GENAI_MODEL_ROOT); give a model "
    "folder's path relative to it."
)


def require_admin(request: Request, settings: SettingsDep) -> None:
    server = settings.server
    if not server.admin_enabled:
        raise AdminDisabled(
            "The admin routes are off: set GENAI_ADMIN_API_KEY (they then take that key) or "
            "GENAI_ADMIN=true to turn them on."
        )
    if not is_admin(request, server):
        raise AdminKeyRequired(
            "The admin routes take an admin key (GENAI_ADMIN_API_KEY), not a user key; a user "
            "key lists and cancels its own requests on /v1/requests."
        )


router = APIRouter(
    prefix="/admin",
    tags=["admin"],
    dependencies=[Depends(require_admin)],
    responses={
        401: ERROR_RESPONSES[401],
        403: {
            "model": ErrorResponse,
            "description": "The admin routes are off, or the key is not an admin key",
        },
    },
)


@router.get("/requests", response_model=InflightList)
async def list_requests(models: ModelsDep) -> InflightList:
    """Every running and waiting request, whoever's."""
    return listed(models, owner=None, everyone=True)


@router.post(
    "/requests/{request_id}/cancel", response_model=CancelResult, responses=ERROR_RESPONSES
)
async def cancel_request(request_id: str, models: ModelsDep) -> CancelResult:
    """Terminate a running or waiting request, whoever's; it finishes with reason
    ``cancelled``."""
    return cancel_owned(models, request_id, owner=None, everyone=True)


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
    ``name``; its unset fields take the server's model settings. At the GENAI_MAX_MODELS
    cap of loaded models, 400 (a model declared to load on first use evicts an idle one
    instead; this load does not)."""
    server = settings.server
    entry = confined(body, server)
    # An operator's load never evicts (a model loaded on first use does: routes never wait
    # on the admin's behalf).
    if models.loaded_count >= server.max_models:
        raise TooManyModels(
            f"{server.max_models} models are loaded, the most GENAI_MAX_MODELS allows; unload "
            "one first.",
            param="name",
        )
    config = service_config(model_fields(settings.model, entry), server.limits())
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


def confined(body: LoadModelRequest, server: ServerSettings) -> ModelEntry:
    """``body`` with its paths resolved under the model root; a path that is not a model folder
    (or adapter file) under it gets :data:`NOT_UNDER_ROOT`, whatever else it is."""
    if server.model_root is None:
        raise LoadingDisabled(
            "Loading models at runtime is off: set GENAI_MODEL_ROOT to the folder they are "
            "loaded from."
        )
    root = server.model_root.resolve()
    entry = body.resolved(root)
    if not _model_folder(under(entry.path, root)):
        raise InvalidRequest(NOT_UNDER_ROOT, param="path")
    for file in entry.adapters.values():
        if not _is_file(under(file, root)):
            raise InvalidRequest(NOT_UNDER_ROOT, param="adapters")
    return entry


def under(path: Path, root: Path) -> Path | None:
    """``path`` with its links followed, if that is under ``root`` (else None)."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a link loop, a NUL in the name
        return None
    return real if real.is_relative_to(root) else None


def _model_folder(path: Path | None) -> bool:
    """A folder a model may be served from: a builder's (genai_config.json), an export's
    (config.json: Optimum, sentence-transformers, Whisper) or an ONNX Runtime model package
    (manifest.json). The loader checks the rest."""
    try:
        return path is not None and path.is_dir() and any(_is_file(path / f) for f in MODEL_FILES)
    except (OSError, ValueError):
        return False


def _is_file(path: Path | None) -> bool:
    try:
        return path is not None and path.is_file()
    except (OSError, ValueError):
        return False


MODEL_FILES = ("genai_config.json", "config.json", "manifest.json")
