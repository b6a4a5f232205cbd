"""Bodies of the operations routes: readiness and the admin actions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.common import RequestModel


class Readiness(BaseModel):
    status: Literal["ready", "loading", "draining", "error"]
    scheduler: str | None = None


class InflightRequest(BaseModel):
    id: str
    state: Literal["running", "waiting"]
    prompt_tokens: int
    generated_tokens: int
    age_seconds: float
    model: str


class InflightList(BaseModel):
    data: list[InflightRequest]


class CancelResult(BaseModel):
    id: str
    cancelled: bool


class ProfilingRequest(RequestModel):
    model: str | None = Field(None, description="The model to profile; omitted: the default.")
    enabled: bool = Field(description="true: profile the next `steps` model steps; false: stop")
    steps: int = Field(
        100, ge=1, le=10_000, description="Model steps to profile; then profiling stops by itself."
    )


class ModelState(BaseModel):
    id: str
    status: Literal["ok", "loading", "error"]
    device: str
    max_model_len: int | None
    adapters: list[str]


class UnloadResult(BaseModel):
    id: str
    unloaded: bool
    cancelled: int = Field(description="Its sequences cancelled after the drain timeout.")


class ProfilingState(BaseModel):
    enabled: bool
    directory: str
    steps_left: int = Field(description="Model steps still to profile (0: off).")
    kept_files: int
