"""Loading onnxruntime-genai and a model. Runs on the scheduler's thread (the owner thread)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from backends.config import ModelConfig
from backends.errors import StartupError
from backends.models.folder import ModelFolder, inspect_model_folder
from backends.models.providers import (
    ProviderChoice,
    apply_provider,
    detect_available,
    select_provider,
)

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


def usable_cpus() -> int:
    """CPUs this process may run on (cgroup/affinity aware where the OS tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def decode_ids(tokenizer: Any, token_ids: Sequence[int]) -> str:
    """Token ids to text as generation decodes them: through ``tokenizer``'s stream.
    (``Tokenizer.decode`` of a whole sequence stopped at the first byte token that is not valid
    UTF-8 on its own, silently dropping the rest.)"""
    stream = tokenizer.create_stream()
    return "".join(str(stream.decode(int(t))) for t in token_ids)


@dataclass
class LoadedModel:
    """A model folder ready to serve: the tokenizer now, the og.Model when first asked for.

    The og.Model (weights, sessions) is made lazily because the ``batch`` strategy runs the
    decoder on its own onnxruntime session and needs only the tokenizer; loading the weights
    twice would double the memory."""

    og: Any
    og_config: Any  # og.Config with the provider and thread settings applied
    tokenizer: Any
    folder: ModelFolder
    provider: ProviderChoice
    max_length: int
    eos_token_ids: frozenset[int]
    threads: int  # intra-op threads (CPU)
    # Special tokens written back into the text (tool-call and reasoning markers, which
    # onnxruntime-genai's decoder drops), id -> text; set by whoever knows the chat format.
    kept_tokens: dict[int, str] = field(default_factory=dict)
    adapter_files: Mapping[str, Path] = field(default_factory=dict)  # LoRA: name -> file

    def token_text(self, stream: Any, token: int) -> str:
        """A generated token's text: the tokenizer stream's, or for the tool-call and reasoning
        markers that are special tokens (which onnxruntime-genai's decoder drops) the marker."""
        kept = self.kept_tokens.get(token)
        return kept if kept is not None else str(stream.decode(token))

    def decode(self, token_ids: Sequence[int]) -> str:
        return decode_ids(self.tokenizer, token_ids)

    @cached_property
    def model(self) -> Any:
        """The og.Model; call on the owner thread."""
        try:
            return self.og.Model(self.og_config)
        except Exception as exc:  # onnxruntime-genai reports through RuntimeError/OSError
            raise StartupError(
                f"onnxruntime-genai could not load {self.folder.path}: {exc}"
            ) from None

    @cached_property
    def adapters(self) -> Any:
        """og.Adapters with every configured LoRA adapter loaded; call on the owner thread."""
        adapters = self.og.Adapters(self.model)
        for name, path in self.adapter_files.items():
            try:
                adapters.load(str(path), name)
            except Exception as exc:  # onnxruntime-genai reports through RuntimeError
                raise StartupError(
                    f"The LoRA adapter {name!r} ({path}) did not load: {exc}"
                ) from None
        return adapters

    @cached_property
    def processor(self) -> Any:
        """og's multimodal processor (images to pixels, placeholders to image tokens); call on
        the owner thread."""
        return self.model.create_multimodal_processor()

    @property
    def modalities(self) -> tuple[str, ...]:
        return self.folder.modalities

    @property
    def image_token_id(self) -> int | None:
        value = self.folder.config.get("model", {}).get("image_token_id")
        return int(value) if isinstance(value, int) else None

    @cached_property
    def guidance_tokenizer(self) -> Any:
        """llguidance's view of the tokenizer (for checking grammars), or None without a
        tokenizer.json; made at the first request with a grammar."""
        path = self.folder.path / "tokenizer.json"
        if not path.is_file():
            return None
        import llguidance

        eos = sorted(self.eos_token_ids)
        return llguidance.LLTokenizer(str(path), n_vocab=self.vocab_size, eos_token=eos)

    @property
    def vocab_size(self) -> int:
        return int(self.folder.config["model"]["vocab_size"])

    @property
    def dynamic_batching(self) -> bool:
        """Paged-attention models (CUDA fp16/bf16, WebGPU) get continuous batching."""
        engine = self.folder.config.get("engine", {})
        return isinstance(engine, dict) and "dynamic_batching" in engine


# The stages beside the decoder that run once per image (or audio clip). onnxruntime's CPU
# arena keeps what the largest run needed: for them and for their model's decoder (whose
# longest prefill, eight images' tokens, held its attention scores: 67 MB on the test model)
# it goes, so what the largest request's media needed is freed after it.
MEDIA_STAGES = ("vision", "embedding", "speech")


def session_overlay(
    threads: int, provider: ProviderChoice, stages: Iterable[str] = ()
) -> dict[str, Any] | None:
    """genai_config overlay for CPU threading, and no CPU arena for a model with media
    ``stages`` (those and its decoder); accelerators keep the folder's own settings."""
    if provider.name != "cpu":
        return None
    decoder: dict[str, Any] = {"intra_op_num_threads": threads}
    model: dict[str, Any] = {"decoder": {"session_options": decoder}}
    for stage in stages:
        if stage in MEDIA_STAGES:
            model[stage] = {"session_options": {"enable_cpu_mem_arena": False}}
            decoder["enable_cpu_mem_arena"] = False
    return {"model": model}


def resolve_max_length(requested: int | None, context_length: int) -> int:
    if requested is None:
        return context_length
    if requested > context_length:
        raise StartupError(
            f"GENAI_MAX_LENGTH={requested} exceeds the model's context length ({context_length})."
        )
    return requested


def check_threads(requested: int | None) -> int:
    """The intra-op threads: every usable CPU unless set. More threads than CPUs only take
    turns on them, and onnxruntime makes each one at load (thousands of them took minutes)."""
    cpus = usable_cpus()
    if requested is not None and requested > cpus:
        raise StartupError(
            f"GENAI_INTRA_OP_THREADS={requested} is more than the {cpus} CPUs this process may use."
        )
    return requested or cpus


def check_adapters(cfg: ModelConfig) -> None:
    missing = [f"{name} ({path})" for name, path in cfg.adapters.items() if not path.is_file()]
    if missing:
        raise StartupError(f"{cfg.name}: LoRA adapter files not found: {', '.join(missing)}")


def load_model(cfg: ModelConfig) -> LoadedModel:
    og = import_og()
    choice = select_provider(cfg.device, detect_available(og))
    # A hub repo's variant is chosen for the provider (or the one pinned).
    folder = inspect_model_folder(cfg.path, provider=choice.name, variant=cfg.variant)
    log.info("execution provider: %s (%s)", choice.name, choice.reason)
    max_length = resolve_max_length(cfg.max_length, folder.context_length)
    threads = check_threads(cfg.intra_op_threads)
    try:
        config = og.Config(str(folder.path))
        apply_provider(config, choice)
        overlay = session_overlay(threads, choice, folder.config.get("model", {}))
        if overlay is not None:
            config.overlay(json.dumps(overlay))
        tokenizer = og.Tokenizer(str(folder.path))  # no weights needed for that
    except Exception as exc:  # onnxruntime-genai reports through RuntimeError/OSError
        raise StartupError(f"onnxruntime-genai could not load {folder.path}: {exc}") from None
    eos = frozenset(int(t) for t in tokenizer.eos_token_ids)
    log.info(
        "%s model in %s: context %d, max_length %d, intra-op threads %s",
        folder.model_type,
        folder.path,
        folder.context_length,
        max_length,
        threads if choice.name == "cpu" else "provider default",
    )
    check_adapters(cfg)
    model = LoadedModel(og, config, tokenizer, folder, choice, max_length, eos, threads)
    model.adapter_files = dict(cfg.adapters)
    return model
