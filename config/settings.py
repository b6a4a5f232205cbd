"""Settings, in two parts, read from the environment and `.env`, validated at start.

- :class:`ModelSettings`: what is served and how it runs (folder, name, device, threads, max
  length, scheduler, cache);
- :class:`ServerSettings` (config/server.py): how it is served, in groups (bind, access, the
  gateway, browsers, connections, media, limits, the Responses store, profiling).

A model setting's type, bounds and default are those of its field on the core's
``backends.config.ModelConfig``, declared there once.

Every field has one environment name (``GENAI_*``, or the original ``HOST``/``PORT``/...) and a
description; the command line (``config/cli.py``), ``.env.example`` and the table in
``docs/configuration.md`` are derived from or checked against these fields.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic_settings import BaseSettings

from backends.config import (
    AtLeastOne,
    Count,
    Device,
    KeepLoaded,
    KvBudget,
    LoadWhen,
    LogitNoise,
    LookupLength,
    ModelConfig,
    Name,
    PrefillChunk,
    PrefillOverlap,
    PrefixStoreMib,
    ReasoningParserName,
    SchedulerName,
    SpeculativeTokens,
    Tokens,
    ToolParserName,
)
from config.fields import (
    DEMO_MODEL_DIR,
    ENV_FILE,
    REPO_ROOT,
    SETTINGS_CONFIG,
    env_name,
    setting,
    split_csv,
)
from config.server import ServerSettings

__all__ = [  # what the rest of the tree imports from here
    "DEMO_MODEL_DIR",
    "ENV_FILE",
    "PARTS",
    "SETTING_OF",
    "REPO_ROOT",
    "ModelSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "env_name",
    "env_names",
    "split_csv",
    "unknown_env_names",
]

# A model setting's type, bounds and default are its ModelConfig field's: declared once there.
_CORE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
# The ModelConfig fields whose model setting is named otherwise.
SETTING_OF = {"path": "model_dir", "name": "model_name", "variant": "model_variant"}
_CORE_OF = {setting: core for core, setting in SETTING_OF.items()}


def _model_setting(env: str, field: str, description: str) -> Any:
    """A model setting: its ModelConfig field gives its default, and its annotation (the core's
    type) its bounds."""
    return setting(_CORE_DEFAULTS[_CORE_OF.get(field, field)], env, field, description)


class ModelSettings(BaseSettings):
    model_config = SETTINGS_CONFIG

    model_dir: Path = setting(
        DEMO_MODEL_DIR, "GENAI_MODEL_DIR", "model_dir", "Model folder (genai_config.json, ...)."
    )
    models_file: Path | None = setting(
        None,
        "GENAI_MODELS_FILE",
        "models_file",
        "A TOML or JSON file listing several models to serve, each with its own settings "
        "(unset fields take the model settings here); replaces GENAI_MODEL_DIR.",
    )
    model_variant: str | None = _model_setting(
        "GENAI_MODEL_VARIANT",
        "model_variant",
        "In a hub-layout model folder, the variant subfolder or ONNX file to serve (its path "
        "in the folder, or its last part, e.g. cuda/cuda-fp16 or model_q4); unset: the one "
        "made for the execution provider.",
    )
    model_name: Name = _model_setting(
        "GENAI_MODEL_NAME",
        "model_name",
        "Name the model is served under; a request naming another model gets 404.",
    )
    device: Device = _model_setting(
        "GENAI_DEVICE",
        "device",
        "Execution provider: auto (CUDA, then DirectML, then CoreML, then CPU), cpu, cuda, "
        "directml, coreml, webgpu, openvino or qnn.",
    )
    max_length: Tokens | None = _model_setting(
        "GENAI_MAX_LENGTH",
        "max_length",
        "Tokens per sequence (prompt + generated); unset: the model's context length.",
    )
    intra_op_threads: AtLeastOne | None = _model_setting(
        "GENAI_INTRA_OP_THREADS",
        "intra_op_threads",
        "onnxruntime intra-op threads (CPU); unset: every CPU this process may use.",
    )
    prefill_chunk: PrefillChunk = _model_setting(
        "GENAI_PREFILL_CHUNK",
        "prefill_chunk",
        "Prompt tokens prefilled per scheduler step.",
    )
    step_tokens: Count = _model_setting(
        "GENAI_STEP_TOKENS",
        "step_tokens",
        "batch scheduler: tokens one step may feed (vLLM's max_num_batched_tokens): beside n "
        "decoding sequences a newcomer's prompt is prefilled in chunks of at most this minus "
        "n tokens, so decoding never stalls behind a long prompt; 0: chunks of "
        "GENAI_PREFILL_CHUNK.",
    )
    prefill_overlap: PrefillOverlap = _model_setting(
        "GENAI_PREFILL_OVERLAP",
        "prefill_overlap",
        "batch scheduler: a newcomer's prompt is prefilled on a worker thread, with half the "
        "intra-op threads, while the decoding sequences go on stepping on the other half, so "
        "none of them waits for it. auto: only for a prompt whose read would stall them for "
        "more than a decode step and a half, and only while the measured run times say it "
        "pays (else in the step, in chunks that stall them no longer); true: always; false: "
        "never (GENAI_STEP_TOKENS applies only then).",
    )
    scheduler: SchedulerName = _model_setting(
        "GENAI_SCHEDULER",
        "scheduler",
        "auto (engine for dynamic-batching models, batch on the CPU, generator for LoRA "
        "adapters and other providers), generator, engine or "
        "batch (continuous batching on the CPU).",
    )
    cache_sequences: Count = _model_setting(
        "GENAI_CACHE_SEQUENCES",
        "cache_sequences",
        "Finished sequences kept for prefix reuse (LRU); 0 keeps none (batch still shares "
        "prefixes across sessions: GENAI_PREFIX_SHARE_MIN).",
    )
    tool_parser: ToolParserName = _model_setting(
        "GENAI_TOOL_PARSER",
        "tool_parser",
        "How the model writes tool calls: auto (read off its chat template), none, hermes "
        "(Qwen, Hermes), llama3_json, mistral, phi4_mini_json or deepseek_v3.",
    )
    reasoning_parser: ReasoningParserName = _model_setting(
        "GENAI_REASONING_PARSER",
        "reasoning_parser",
        "How the model writes its thinking: auto (read off its chat template), none, think "
        "(<think>...</think>: Qwen3, DeepSeek-R1, Phi-4-reasoning) or mistral ([THINK]).",
    )
    kv_cache_mib: KvBudget = _model_setting(
        "GENAI_KV_CACHE_MIB",
        "kv_cache_mib",
        "batch scheduler: KV cache memory for all slots, in MiB, reserved at start; the "
        "tokens per sequence are the max length or what this budget gives each slot. auto: "
        "a quarter of the memory the process may use (the cgroup limit or the RAM), split "
        "among the workers, and at most half of what is available at load.",
    )
    prefix_share_min: Count = _model_setting(
        "GENAI_PREFIX_SHARE_MIN",
        "prefix_share_min",
        "batch scheduler: shortest shared prompt prefix (tokens) copied from another "
        "session's KV cache or restored from the prefix store; 0 turns sharing across "
        "sessions (and the store) off.",
    )
    speculative_tokens: SpeculativeTokens | None = _model_setting(
        "GENAI_SPECULATIVE_TOKENS",
        "speculative_tokens",
        "n-gram (prompt-lookup) speculation: at most this many tokens a sequence drafts from "
        "its own prompt and output for the model to verify in one run (batch: while few "
        "sequences decode; generator: onnxruntime-genai's own n-gram, at most 16); 0 turns it "
        "off; unset: the scheduler's default (batch 8, generator 0: docs/speculation.md). A "
        "request may override it (its `speculative` object).",
    )
    prompt_lookup_min: LookupLength = _model_setting(
        "GENAI_PROMPT_LOOKUP_MIN",
        "prompt_lookup_min",
        "n-gram speculation: the shortest n-gram of the sequence's end looked up in its "
        "prompt and output (vLLM's prompt_lookup_min).",
    )
    prompt_lookup_max: LookupLength = _model_setting(
        "GENAI_PROMPT_LOOKUP_MAX",
        "prompt_lookup_max",
        "n-gram speculation: the longest n-gram looked up, tried first (vLLM's "
        "prompt_lookup_max; the generator's onnxruntime-genai n-gram matches this length "
        "only).",
    )
    logit_noise: LogitNoise = _model_setting(
        "GENAI_LOGIT_NOISE",
        "logit_noise",
        "Testing, batch scheduler: every logit of every model run moves by a seeded uniform "
        "draw of at most half this, so the gap between two tokens moves by up to this, as "
        "another CPU kind's kernels move it (about 1.2 between int4 kernels: "
        "docs/development.md); 0 turns it off.",
    )
    prefix_store_mib: PrefixStoreMib = _model_setting(
        "GENAI_PREFIX_STORE_MIB",
        "prefix_store_mib",
        "batch scheduler: host-RAM prefix store (MiB): the KV cache of rows given up is kept "
        "there in 32-token blocks (LRU) for later prompts that share their prefix; 0 disables.",
    )
    load: LoadWhen = _model_setting(
        "GENAI_LOAD",
        "load",
        "When a model is loaded: start (with the server) or first_use (by the first request "
        "that names it; requests meanwhile wait for that one load).",
    )
    keep_loaded: KeepLoaded = _model_setting(
        "GENAI_KEEP_LOADED",
        "keep_loaded",
        "Seconds a model stays loaded after its last request, then it is unloaded (the next "
        "request loads it again); -1: until unloaded or evicted. An Ollama request's "
        "keep_alive overrides it for that model.",
    )

    @field_validator("device", mode="before")
    @classmethod
    def _device(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().lower()
            return "directml" if value == "dml" else value
        return value

    @field_validator("model_dir", mode="after")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _lookup_bounds(self) -> ModelSettings:
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(
                f"GENAI_PROMPT_LOOKUP_MIN ({self.prompt_lookup_min}) is more than "
                f"GENAI_PROMPT_LOOKUP_MAX ({self.prompt_lookup_max})"
            )
        return self


PARTS: tuple[type[BaseSettings], ...] = (ModelSettings, ServerSettings)


class SettingsError(ValueError):
    """Settings that cannot be used; the message says why (and the launcher prints it)."""


class Settings(BaseModel):
    """Both parts, built once in the launcher (or a test) and passed down."""

    model_config = ConfigDict(frozen=True)

    model: ModelSettings
    server: ServerSettings

    @classmethod
    def load(cls, **fields: Any) -> Settings:
        """Read the environment and ``.env``; ``fields`` (by field name) override them."""
        unknown = set(fields) - {name for part in PARTS for name in part.model_fields}
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")

        def part(cls_: type[BaseSettings]) -> Any:
            return cls_(**{k: v for k, v in fields.items() if k in cls_.model_fields})

        return cls(model=part(ModelSettings), server=part(ServerSettings))


def env_names() -> list[str]:
    """Every setting's environment name, model settings first."""
    return [env_name(f) for part in PARTS for f in part.model_fields.values()]


def unknown_env_names(
    environ: Mapping[str, str] | None = None, env_file: Path | None = None
) -> list[tuple[str, str | None]]:
    """``GENAI_*`` names that are no setting, each with the closest known name (or None)."""
    environ = os.environ if environ is None else environ
    env_file = Path(ENV_FILE) if env_file is None else env_file
    given: Iterable[str] = list(environ)
    if env_file.is_file():
        given = [*given, *dotenv_values(env_file)]
    known = env_names()
    unknown = sorted(
        {n for n in given if n.upper().startswith("GENAI_") and n.upper() not in known}
    )
    return [
        (n, next(iter(difflib.get_close_matches(n.upper(), known, n=1)), None)) for n in unknown
    ]
