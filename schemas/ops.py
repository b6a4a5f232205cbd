"""Bodies of the operations routes: readiness and the admin actions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


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
