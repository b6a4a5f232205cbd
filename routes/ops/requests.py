"""A caller's own in-flight requests: ``GET /v1/requests`` lists them,
``POST /v1/requests/{id}/cancel`` ends one. With keys, "own" is the key's (its owner, the hash
routes/http/auth.py gives it, as the stored Responses are); another key's requests are not
listed and cannot be cancelled (404, as for an id never seen). Without keys callers cannot be
told apart, so these routes are on only where the admin routes are (GENAI_ADMIN=true).

The admin routes list and cancel everyone's through the same two functions.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Depends, Request

from backends.core.registry import ModelRegistry
from backends.errors import GenAIError, RequestNotFound
from routes.http.auth import keys_set, request_owner
from routes.http.deps import ERROR_RESPONSES, ModelsDep, SettingsDep
from schemas.errors import ErrorResponse
from schemas.ops import CancelResult, InflightList, InflightRequest


def listed(models: ModelRegistry, owner: str | None, everyone: bool = False) -> InflightList:
    """The running and waiting requests of ``owner`` (all of them for ``everyone``)."""
    return InflightList(
        data=[
            InflightRequest(**{k: v for k, v in asdict(r).items() if k != "owner"})
            for r in models.stats().requests
            if everyone or r.owner == owner
        ]
    )


def cancel_owned(
    models: ModelRegistry, request_id: str, owner: str | None, everyone: bool = False
) -> CancelResult:
    """Cancel ``request_id`` if it is ``owner``'s (anyone's for ``everyone``); another owner's
    is not found, as one never seen. (No await between the look and the cancel: the id is the
    same request in both.)"""
    found = [r for r in models.stats().requests if r.id == request_id]
    if not found or not (everyone or all(r.owner == owner for r in found)):
        raise RequestNotFound(
            f"No request {request_id!r} is running or waiting.", param="request_id"
        )
    models.cancel(request_id)
    return CancelResult(id=request_id, cancelled=True)


class OwnRequestsOff(GenAIError):
    """Without keys and with the admin routes off, there is no caller to scope to."""

    status_code = 403
    error_type = "permission_error"
    code = "admin_disabled"


def require_owner(request: Request, settings: SettingsDep) -> str | None:
    server = settings.server
    if not keys_set(server) and not server.admin_enabled:
        raise OwnRequestsOff(
            "Without API keys callers cannot be told apart: set GENAI_API_KEY to list and "
            "cancel each key's own requests here (or GENAI_ADMIN=true for everyone's)."
        )
    return request_owner(request)


router = APIRouter(prefix="/v1/requests", tags=["ops"])
OFF: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorResponse,
        "description": "No API keys and the admin routes off: callers cannot be told apart",
    }
}


@router.get("", response_model=InflightList, responses={401: ERROR_RESPONSES[401], **OFF})
async def own_requests(
    models: ModelsDep, owner: str | None = Depends(require_owner)
) -> InflightList:
    """The caller's running and waiting requests (its key's)."""
    return listed(models, owner)


@router.post(
    "/{request_id}/cancel", response_model=CancelResult, responses={**ERROR_RESPONSES, **OFF}
)
async def cancel_own_request(
    request_id: str, models: ModelsDep, owner: str | None = Depends(require_owner)
) -> CancelResult:
    """Terminate one of the caller's running or waiting requests; it finishes with reason
    ``cancelled``."""
    return cancel_owned(models, request_id, owner)
