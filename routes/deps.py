"""Typed dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from backends.service import InferenceService
from schemas.errors import ErrorResponse
from schemas.settings import Settings


def get_service(request: Request) -> InferenceService:
    service: InferenceService = request.app.state.service
    return service


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


ServiceDep = Annotated[InferenceService, Depends(get_service)]
SettingsDep = Annotated[Settings, Depends(get_settings)]

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 404, 500, 503)
}
