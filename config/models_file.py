"""The models file (``GENAI_MODELS_FILE``): several models, each with its own settings.

TOML or JSON; relative paths are relative to the file. A field a model leaves out takes the
server-wide model setting (``GENAI_DEVICE``, ``GENAI_SCHEDULER``, ...)::

    [[models]]
    name = "demo"
    path = "models/demo-llama"
    scheduler = "generator"
    adapters = { demo-pirate = "adapters/pirate.onnx_adapter" }

    [[models]]
    name = "demo-batch"
    path = "models/demo-llama"
    scheduler = "batch"

    [[models]]
    name = "embedder"
    path = "models/my-embedder"   # a sentence-transformers or Optimum ONNX folder
    kind = "embedding"            # read off the folder if unset, like pooling and normalize
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from config.settings import (
    MAX_KV_CACHE_MIB,
    PROMPT_LOOKUP_LIMIT,
    SPECULATIVE_TOKENS_MAX,
    Device,
    ModelSettings,
    ReasoningParserName,
    SchedulerName,
    Settings,
    SettingsError,
    ToolParserName,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class ModelEntry(BaseModel):
    """One served model. Unset fields take the server-wide model settings."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, description="The id requests name it by.")
    path: Path = Field(..., description="The model folder.")
    device: Device | None = None
    variant: str | None = Field(
        None, description="In a hub-layout folder: the variant subfolder or ONNX file."
    )
    intra_op_threads: int | None = Field(None, ge=1)
    max_length: int | None = Field(None, gt=0)
    scheduler: SchedulerName | None = None
    prefill_chunk: int | None = Field(None, ge=16)
    step_tokens: int | None = Field(None, ge=0)
    prefill_overlap: bool | Literal["auto"] | None = None
    cache_sequences: int | None = Field(None, ge=0)
    kv_cache_mib: float | None = Field(None, gt=0, le=MAX_KV_CACHE_MIB)
    prefix_share_min: int | None = Field(None, ge=0)
    prefix_store_mib: float | None = Field(None, ge=0, le=MAX_KV_CACHE_MIB)
    speculative_tokens: int | None = Field(None, ge=0, le=SPECULATIVE_TOKENS_MAX)
    prompt_lookup_min: int | None = Field(None, ge=1, le=PROMPT_LOOKUP_LIMIT)
    prompt_lookup_max: int | None = Field(None, ge=1, le=PROMPT_LOOKUP_LIMIT)
    tool_parser: ToolParserName | None = None
    reasoning_parser: ReasoningParserName | None = None
    adapters: dict[str, Path] = Field(
        default_factory=dict, description="LoRA adapters: served name -> .onnx_adapter file."
    )
    # Encoders (docs/api/embeddings.md): each unset one is read off the folder.
    kind: Literal["auto", "generator", "embedding", "reranker"] | None = None
    pooling: Literal["mean", "cls", "last"] | None = None
    normalize: bool | None = None
    max_inputs: int | None = Field(None, ge=1, description="Inputs one request may hold.")
    batch_tokens: int | None = Field(None, ge=1, description="Padded tokens per encoder batch.")
    batch_wait_ms: float | None = Field(
        None, ge=0, description="How long an encoder batch waits for requests on their way."
    )

    def names(self) -> list[str]:
        return [self.name, *self.adapters]

    def resolved(self, base: Path) -> ModelEntry:
        """Paths made absolute against ``base`` (the models file's folder)."""
        return self.model_copy(
            update={
                "path": base / self.path,
                "adapters": {name: base / file for name, file in self.adapters.items()},
            }
        )


class ModelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: list[ModelEntry] = Field(..., min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> ModelsFile:
        seen: set[str] = set()
        for entry in self.models:
            for name in entry.names():
                if name in seen:
                    raise ValueError(f"the name {name!r} is used twice")
                seen.add(name)
        return self


def read_models_file(path: Path) -> ModelsFile:
    """The models file at ``path``, paths resolved; ValueError says what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the models file {path}: {exc.strerror}") from None
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"the models file {path} is not valid {path.suffix[1:]}: {exc}") from None
    try:
        parsed = ModelsFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"the models file {path} is invalid: {problems}") from None
    base = path.resolve().parent
    return ModelsFile(models=[entry.resolved(base) for entry in parsed.models])


def model_fields(model: ModelSettings, entry: ModelEntry | None = None) -> dict[str, Any]:
    """One model's settings as plain values, named as the core's ``ModelConfig`` names them:
    the model settings, overridden by what a models-file entry sets."""
    fields: dict[str, Any] = {
        "path": model.model_dir,
        "name": model.model_name,
        "device": model.device,
        "variant": model.model_variant,
        "intra_op_threads": model.intra_op_threads,
        "max_length": model.max_length,
        "scheduler": model.scheduler,
        "prefill_chunk": model.prefill_chunk,
        "step_tokens": model.step_tokens,
        "prefill_overlap": model.prefill_overlap,
        "cache_sequences": model.cache_sequences,
        "kv_cache_mib": model.kv_cache_mib,
        "prefix_share_min": model.prefix_share_min,
        "prefix_store_mib": model.prefix_store_mib,
        "speculative_tokens": model.speculative_tokens,
        "prompt_lookup_min": model.prompt_lookup_min,
        "prompt_lookup_max": model.prompt_lookup_max,
        "tool_parser": model.tool_parser,
        "reasoning_parser": model.reasoning_parser,
        "adapters": {},
        # Encoders: set per model in the models file; a lone model reads them off its folder.
        "kind": "auto",
        "pooling": None,
        "normalize": None,
        "max_inputs": 512,
        "batch_tokens": 8192,
        "batch_wait_ms": 2.0,
    }
    if entry is not None:
        fields.update(entry.model_dump(exclude_none=True))
    return fields


def served_model_fields(settings: Settings) -> list[dict[str, Any]]:
    """Every served model's fields (:func:`model_fields`): the models file's entries, or the
    single model of the model settings. SettingsError for a models file that cannot be read."""
    path = settings.model.models_file
    if path is None:
        return [model_fields(settings.model)]
    try:
        entries = read_models_file(path).models
    except ValueError as exc:
        raise SettingsError(str(exc)[0].upper() + str(exc)[1:]) from None
    return [model_fields(settings.model, entry) for entry in entries]
