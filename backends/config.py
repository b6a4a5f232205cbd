"""The backend's configuration: plain dataclasses, built by the app factory from the settings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from backends.types import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN, Speculative

SchedulerName = Literal["auto", "generator", "engine", "batch"]
SCHEDULERS: tuple[str, ...] = get_args(SchedulerName)
# n-gram speculation when GENAI_SPECULATIVE_TOKENS is not set: the batch engine's own
# (docs/speculation.md, "The default"); og's n-gram on the generator only when asked for.
SPECULATIVE_TOKENS_BY_SCHEDULER = {"batch": 0, "generator": 0, "engine": 0}
# Where the sampling a request leaves out comes from: the model's folder, or each door's own
# documented default.
SamplingDefaultsName = Literal["model", "api"]


@dataclass(frozen=True)
class ModelConfig:
    """One served model: where it is, how it runs, how its requests are scheduled."""

    path: Path
    name: str = "onnx-genai"
    device: str = "auto"  # "auto" or a key of backends.models.providers.PROVIDERS
    variant: str | None = None  # hub-layout folder: the variant or ONNX file; None: by device
    intra_op_threads: int | None = None  # None: every CPU this process may use
    max_length: int | None = None  # None: the model's context length
    scheduler: SchedulerName = "auto"
    prefill_chunk: int = 256  # prompt tokens prefilled per scheduler step
    step_tokens: int = 0  # batch: tokens per step, decode rows + prefill chunk; 0: no budget
    # batch: a newcomer's prefill runs beside the decode steps: always, never, or "auto" (where
    # the costs measured while serving say it pays: backends/engine/batch/prefill_policy.py)
    prefill_overlap: bool | Literal["auto"] = "auto"
    cache_sequences: int = 4  # finished sequences kept for prefix reuse
    kv_cache_mib: float | None = 1024.0  # batch strategy: KV memory; None: all max_length
    prefix_share_min: int = 32  # batch: shortest prefix copied across sessions; 0: no sharing
    prefix_store_mib: float = 512.0  # batch: host-RAM store of given-up rows' KV; 0: none
    # n-gram speculation: most draft tokens a sequence verifies at once (0: off; None: the
    # scheduler's default, SPECULATIVE_TOKENS_BY_SCHEDULER), and the n-gram lengths looked up
    speculative_tokens: int | None = None
    prompt_lookup_min: int = PROMPT_LOOKUP_MIN
    prompt_lookup_max: int = PROMPT_LOOKUP_MAX
    tool_parser: str = "auto"  # "auto" (from the template), "none", or a parser's name
    reasoning_parser: str = "auto"  # likewise
    adapters: Mapping[str, Path] = field(default_factory=dict)  # LoRA: served name -> file
    # Encoders (embedding, reranker); "auto" reads the kind off the folder.
    kind: str = "auto"  # "auto", "generator", "embedding" or "reranker"
    pooling: str | None = None  # "mean", "cls" or "last"; None: as the folder says
    normalize: bool | None = None  # None: as the folder says
    max_inputs: int = 512  # inputs (texts, documents, pairs) one request may hold
    batch_tokens: int = 8192  # padded tokens one encoder batch may hold
    batch_wait_ms: float = 2.0  # how long a batch waits for requests being tokenized

    def speculative(self, scheduler: str) -> Speculative:
        """The server's n-gram speculation settings for sequences run by ``scheduler``."""
        tokens = self.speculative_tokens
        if tokens is None:
            tokens = SPECULATIVE_TOKENS_BY_SCHEDULER.get(scheduler, 0)
        return Speculative(tokens, self.prompt_lookup_min, self.prompt_lookup_max)


@dataclass(frozen=True)
class Limits:
    """What the server admits, and the defaults requests get."""

    max_concurrency: int = 8  # sequences generating at once
    max_queue: int = 64  # sequences allowed to wait beyond those
    request_timeout: float | None = None  # seconds per request, queue time included
    default_max_tokens: int = 8192
    sampling_defaults: SamplingDefaultsName = "model"


@dataclass(frozen=True)
class ServiceConfig:
    model: ModelConfig
    limits: Limits = field(default_factory=Limits)


def service_config(model: Mapping[str, Any], limits: Mapping[str, Any]) -> ServiceConfig:
    """A model's configuration from plain values (the launcher reads them off the settings:
    ``config.models_file.model_fields`` and ``ServerSettings.limits``)."""
    fields = dict(model)
    fields["path"] = Path(fields["path"])
    fields["adapters"] = {name: Path(f) for name, f in fields.get("adapters", {}).items()}
    return ServiceConfig(ModelConfig(**fields), Limits(**limits))


def service_configs(
    models: Iterable[Mapping[str, Any]], limits: Mapping[str, Any]
) -> list[ServiceConfig]:
    return [service_config(model, limits) for model in models]
