"""From the settings (and the models file) to the backend's configuration, one per model."""

from __future__ import annotations

from typing import Any

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.errors import StartupError
from schemas.models_file import ModelEntry, read_models_file
from schemas.settings import ModelSettings, Settings


def limits(settings: Settings) -> Limits:
    server = settings.server
    return Limits(
        max_concurrency=server.max_concurrency,
        max_queue=server.max_queue,
        request_timeout=server.request_timeout,
        default_max_tokens=server.default_max_tokens,
    )


def model_config(model: ModelSettings, entry: ModelEntry | None = None) -> ModelConfig:
    """One model's configuration: the model settings, overridden by a models-file entry."""
    fields: dict[str, Any] = {
        "path": model.model_dir,
        "name": model.model_name,
        "device": model.device,
        "variant": model.model_variant,
        "intra_op_threads": model.intra_op_threads,
        "max_length": model.max_length,
        "scheduler": model.scheduler,
        "prefill_chunk": model.prefill_chunk,
        "cache_sequences": model.cache_sequences,
        "kv_cache_mib": model.kv_cache_mib,
        "tool_parser": model.tool_parser,
        "reasoning_parser": model.reasoning_parser,
    }
    if entry is not None:
        given = entry.model_dump(exclude_none=True)
        fields.update({k: v for k, v in given.items() if k in fields})
        return ModelConfig(**fields, adapters=dict(entry.adapters))
    return ModelConfig(**fields)


def service_config(settings: Settings) -> ServiceConfig:
    """The backend's configuration for the single model of the model settings."""
    return ServiceConfig(model=model_config(settings.model), limits=limits(settings))


def service_configs(settings: Settings) -> list[ServiceConfig]:
    """Every served model's configuration: the models file's, or the single model's.
    Raises StartupError for a models file that cannot be read."""
    path = settings.model.models_file
    if path is None:
        return [service_config(settings)]
    try:
        entries = read_models_file(path).models
    except ValueError as exc:
        raise StartupError(str(exc)[0].upper() + str(exc)[1:]) from None
    return [ServiceConfig(model_config(settings.model, e), limits(settings)) for e in entries]
