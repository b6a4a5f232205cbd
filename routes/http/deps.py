"""Typed dependencies shared by the routers, and the documented error responses."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from backends.core.registry import ModelRegistry
from config.settings import Settings
from schemas.errors import ErrorResponse


def get_models(request: Request) -> ModelRegistry:
    """The served models (one core each); routes call it as one service, by model name."""
    models: ModelRegistry = request.app.state.models
    return models


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


ModelsDep = Annotated[ModelRegistry, Depends(get_models)]
SettingsDep = Annotated[Settings, Depends(get_settings)]

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Invalid request, or context length exceeded"},
    401: {"model": ErrorResponse, "description": "Missing or invalid API key (if one is set)"},
    404: {"model": ErrorResponse, "description": "Unknown model"},
    429: {"model": ErrorResponse, "description": "At capacity; retry after `Retry-After`"},
    500: {"model": ErrorResponse, "description": "Generation failed"},
    503: {"model": ErrorResponse, "description": "The model is not ready, or shutting down"},
    504: {"model": ErrorResponse, "description": "GENAI_REQUEST_TIMEOUT exceeded"},
}
