"""The one settings object: read from the environment and `.env`, validated at start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from backends.runtime import RuntimeConfig
from backends.service import ServiceConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_MODEL_DIR = REPO_ROOT / "models" / "demo-llama"

Device = Literal["auto", "cpu", "cuda", "directml", "coreml", "webgpu", "openvino", "qnn"]


def _env(name: str, field: str) -> AliasChoices:
    # Accept the documented environment name and the Python field name (for tests/CLI).
    return AliasChoices(name, field)


def usable_cpus() -> int:
    """CPUs this process may run on (cgroup/affinity aware where the OS tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    model_dir: Path = Field(DEMO_MODEL_DIR, validation_alias=_env("GENAI_MODEL_DIR", "model_dir"))
    model_name: str = Field(
        "onnx-genai", min_length=1, validation_alias=_env("GENAI_MODEL_NAME", "model_name")
    )
    device: Device = Field("auto", validation_alias=_env("GENAI_DEVICE", "device"))
    max_length: int | None = Field(
        None, gt=0, validation_alias=_env("GENAI_MAX_LENGTH", "max_length")
    )
    default_max_tokens: int = Field(
        256, gt=0, validation_alias=_env("GENAI_DEFAULT_MAX_TOKENS", "default_max_tokens")
    )
    intra_op_threads: int | None = Field(
        None, ge=1, validation_alias=_env("GENAI_INTRA_OP_THREADS", "intra_op_threads")
    )
    prefill_chunk: int = Field(
        256, ge=16, validation_alias=_env("GENAI_PREFILL_CHUNK", "prefill_chunk")
    )
    scheduler: Literal["auto", "generator", "engine"] = Field(
        "auto", validation_alias=_env("GENAI_SCHEDULER", "scheduler")
    )
    max_concurrency: int = Field(
        8, ge=1, validation_alias=_env("GENAI_MAX_CONCURRENCY", "max_concurrency")
    )
    max_queue: int = Field(64, ge=0, validation_alias=_env("GENAI_MAX_QUEUE", "max_queue"))
    cache_sequences: int = Field(
        4, ge=0, validation_alias=_env("GENAI_CACHE_SEQUENCES", "cache_sequences")
    )
    request_timeout: float | None = Field(
        None, gt=0, validation_alias=_env("GENAI_REQUEST_TIMEOUT", "request_timeout")
    )
    shutdown_timeout: float = Field(
        30.0, ge=0, validation_alias=_env("GENAI_SHUTDOWN_TIMEOUT", "shutdown_timeout")
    )
    sse_ping: float = Field(15.0, gt=0, validation_alias=_env("GENAI_SSE_PING", "sse_ping"))
    profile_dir: Path = Field(
        Path("profiles"), validation_alias=_env("GENAI_PROFILE_DIR", "profile_dir")
    )
    profile_max_files: int = Field(
        50, ge=1, validation_alias=_env("GENAI_PROFILE_MAX_FILES", "profile_max_files")
    )
    host: str = Field("127.0.0.1", validation_alias=_env("HOST", "host"))
    port: int = Field(8002, ge=1, le=65535, validation_alias=_env("PORT", "port"))
    reload: bool = Field(False, validation_alias=_env("RELOAD", "reload"))
    workers: int = Field(1, ge=1, validation_alias=_env("WORKERS", "workers"))
    log_level: Literal["critical", "error", "warning", "info", "debug"] = Field(
        "info", validation_alias=_env("LOG_LEVEL", "log_level")
    )
    # Comma-separated lists. No API key: every route is open. No origins: no CORS at all.
    api_key: SecretStr | None = Field(None, validation_alias=_env("GENAI_API_KEY", "api_key"))
    cors_origins: str = Field("", validation_alias=_env("GENAI_CORS_ORIGINS", "cors_origins"))

    @field_validator("device", "log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().lower()
            return "directml" if value == "dml" else value
        return value

    @field_validator("model_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _reload_means_one_worker(self) -> Settings:
        # uvicorn's reloader runs a single process; several workers would be ignored.
        if self.reload:
            self.workers = 1
        return self

    def service_config(self) -> ServiceConfig:
        """What the inference service needs, as a plain (FastAPI-free) config."""
        return ServiceConfig(
            runtime=RuntimeConfig(
                model_dir=self.model_dir,
                device=self.device,
                intra_op_threads=self.threads,
                max_length=self.max_length,
            ),
            model_name=self.model_name,
            default_max_tokens=self.default_max_tokens,
            prefill_chunk=self.prefill_chunk,
            scheduler=self.scheduler,
            max_concurrency=self.max_concurrency,
            max_queue=self.max_queue,
            cache_sequences=self.cache_sequences,
            request_timeout=self.request_timeout,
        )

    @property
    def threads(self) -> int:
        """Intra-op threads for onnxruntime: explicit setting, else every usable CPU."""
        return self.intra_op_threads or usable_cpus()
