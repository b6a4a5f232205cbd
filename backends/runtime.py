"""Loading onnxruntime-genai and a model. Runs on the scheduler's thread (the owner thread)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.errors import StartupError
from backends.model_folder import ModelFolder, inspect_model_folder
from backends.providers import ProviderChoice, apply_provider, detect_available, select_provider

log = logging.getLogger("genai.runtime")


def import_og() -> Any:
    try:
        import onnxruntime_genai as og
    except ImportError as exc:
        raise StartupError(
            "onnxruntime-genai is not installed (or failed to import: "
            f"{exc}). Install it with: pip install onnxruntime-genai "
            "(or onnxruntime-genai-cuda / onnxruntime-genai-directml for a GPU)."
        ) from None
    return og


@dataclass(frozen=True)
class RuntimeConfig:
    model_dir: Path
    device: str
    intra_op_threads: int
    max_length: int | None


@dataclass
class LoadedModel:
    og: Any
    model: Any
    tokenizer: Any
    folder: ModelFolder
    provider: ProviderChoice
    max_length: int
    eos_token_ids: frozenset[int]

    @property
    def dynamic_batching(self) -> bool:
        """Paged-attention models (CUDA fp16/bf16, WebGPU) get continuous batching."""
        engine = self.folder.config.get("engine", {})
        return isinstance(engine, dict) and "dynamic_batching" in engine


def session_overlay(threads: int, provider: ProviderChoice) -> dict[str, Any] | None:
    """genai_config overlay for CPU threading; accelerators keep the folder's own settings."""
    if provider.name != "cpu":
        return None
    return {"model": {"decoder": {"session_options": {"intra_op_num_threads": threads}}}}


def resolve_max_length(requested: int | None, context_length: int) -> int:
    if requested is None:
        return context_length
    if requested > context_length:
        raise StartupError(
            f"GENAI_MAX_LENGTH={requested} exceeds the model's context length ({context_length})."
        )
    return requested


def load_model(cfg: RuntimeConfig) -> LoadedModel:
    folder = inspect_model_folder(cfg.model_dir)
    og = import_og()
    choice = select_provider(cfg.device, detect_available(og))
    log.info("execution provider: %s (%s)", choice.name, choice.reason)
    max_length = resolve_max_length(cfg.max_length, folder.context_length)
    try:
        config = og.Config(str(folder.path))
        apply_provider(config, choice)
        overlay = session_overlay(cfg.intra_op_threads, choice)
        if overlay is not None:
            config.overlay(json.dumps(overlay))
        model = og.Model(config)
        tokenizer = og.Tokenizer(model)
    except Exception as exc:  # onnxruntime-genai reports through RuntimeError/OSError
        raise StartupError(f"onnxruntime-genai could not load {folder.path}: {exc}") from None
    eos = frozenset(int(t) for t in tokenizer.eos_token_ids)
    log.info(
        "loaded %s model from %s: context %d, max_length %d, intra-op threads %s",
        folder.model_type,
        folder.path,
        folder.context_length,
        max_length,
        cfg.intra_op_threads if choice.name == "cpu" else "provider default",
    )
    return LoadedModel(og, model, tokenizer, folder, choice, max_length, eos)
