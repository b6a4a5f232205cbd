"""The backend's configuration: plain dataclasses, built by the app factory from the settings.

:class:`ModelConfig` is the one declaration of a served model's fields: their types, their
bounds (``annotated_types`` metadata, which pydantic reads) and their defaults. ``config/``
derives the environment's model settings and the models file's entries from it; this module
knows nothing of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from annotated_types import Ge, Gt, Le, MaxLen, MinLen

from backends.types import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN, Speculative

# The allowed values. Tied to backends.models.providers.PROVIDERS and to the parsers' registry
# by tests/config/test_settings.py.
Device = Literal["auto", "cpu", "cuda", "directml", "coreml", "webgpu", "openvino", "qnn"]
SchedulerName = Literal["auto", "generator", "engine", "batch"]
SCHEDULERS: tuple[str, ...] = get_args(SchedulerName)
ToolParserName = Literal[
    "auto", "none", "hermes", "llama3_json", "mistral", "phi4_mini_json", "deepseek_v3"
]
ReasoningParserName = Literal["auto", "none", "think", "mistral"]
ModelKind = Literal["auto", "generator", "embedding", "reranker"]
Pooling = Literal["mean", "cls", "last"]
# n-gram speculation when GENAI_SPECULATIVE_TOKENS is not set: the batch engine's own
# (docs/speculation.md, "The default"); og's n-gram on the generator only when asked for.
SPECULATIVE_TOKENS_BY_SCHEDULER = {"batch": 8, "generator": 0, "engine": 0}
# Where the sampling a request leaves out comes from: the model's folder, or each door's own
# documented default.
SamplingDefaultsName = Literal["model", "api"]
# When a model is loaded: with the server, or by the first request that names it.
LoadWhen = Literal["start", "first_use"]

# A model path that names a Hugging Face hub repo rather than a folder: hf:ORG/REPO[:VARIANT]
# (backends/models/hub.py fetches it into the hub's cache; the models file keeps it as it is).
HUB_SCHEME = "hf:"


def hub_source(path: str | Path) -> str | None:
    """``ORG/REPO[:VARIANT]`` where ``path`` is ``hf:ORG/REPO[:VARIANT]``; None for a folder."""
    text = str(path)
    return text.removeprefix(HUB_SCHEME) if text.startswith(HUB_SCHEME) else None


# The bounds. n-gram speculation's draft length (docs/speculation.md says how it was chosen)
# and the longest n-gram looked up (og's n-gram: ngram_size - 1 <= 15); schemas/common.py's
# request bounds are these (tests/config/test_settings.py).
SPECULATIVE_TOKENS_MAX = 32
PROMPT_LOOKUP_LIMIT = 16
MAX_KV_CACHE_MIB = 2.0**30  # 1 PiB: any real budget, and finite once counted in bytes
MAX_NAME_CHARS = 128  # a served name's length at most: names go into /metrics and /health
Name = Annotated[str, MinLen(1), MaxLen(MAX_NAME_CHARS)]
Count = Annotated[int, Ge(0)]  # 0 is allowed: it turns the feature off
AtLeastOne = Annotated[int, Ge(1)]
Tokens = Annotated[int, Gt(0)]
PrefillChunk = Annotated[int, Ge(16)]
PrefillOverlap = bool | Literal["auto"]
KvCacheMib = Annotated[float, Gt(0), Le(MAX_KV_CACHE_MIB)]
# "auto": a share of the memory this process may use (backends/engine/batch/kv_budget.py)
KvBudget = KvCacheMib | Literal["auto"]
PrefixStoreMib = Annotated[float, Ge(0), Le(MAX_KV_CACHE_MIB)]
SpeculativeTokens = Annotated[int, Ge(0), Le(SPECULATIVE_TOKENS_MAX)]
LookupLength = Annotated[int, Ge(1), Le(PROMPT_LOOKUP_LIMIT)]
Milliseconds = Annotated[float, Ge(0)]
# Testing: the largest shift of a gap between two logits (batch: LogitNoise in its decoder).
LogitNoise = Annotated[float, Ge(0), Le(100)]
# Seconds a model stays loaded after its last request; -1: until it is unloaded or evicted.
KeepLoaded = Annotated[float, Ge(-1)]


@dataclass(frozen=True)
class ModelConfig:
    """One served model: where it is, how it runs, how its requests are scheduled."""

    path: Path
    name: Name = "onnx-genai"
    device: Device = "auto"  # "auto" or a key of backends.models.providers.PROVIDERS
    variant: str | None = None  # hub-layout folder: the variant or ONNX file; None: by device
    intra_op_threads: AtLeastOne | None = None  # None: every CPU this process may use
    max_length: Tokens | None = None  # None: the model's context length
    scheduler: SchedulerName = "auto"
    prefill_chunk: PrefillChunk = 256  # prompt tokens prefilled per scheduler step
    step_tokens: Count = 0  # batch: tokens per step, decode rows + prefill chunk; 0: no budget
    # batch: a newcomer's prefill runs beside the decode steps: always, never, or "auto" (where
    # the costs measured while serving say it pays: backends/engine/batch/prefill_policy.py)
    prefill_overlap: PrefillOverlap = "auto"
    cache_sequences: Count = 4  # finished sequences kept for prefix reuse
    # batch strategy: KV memory in MiB, "auto" (a share of the machine's: kv_budget.py), or
    # None (every slot holds max_length tokens, whatever that takes)
    kv_cache_mib: KvBudget | None = "auto"
    prefix_share_min: Count = 32  # batch: shortest prefix copied across sessions; 0: no sharing
    prefix_store_mib: PrefixStoreMib = 512.0  # batch: host-RAM store of given-up rows' KV; 0: none
    # n-gram speculation: most draft tokens a sequence verifies at once (0: off; None: the
    # scheduler's default, SPECULATIVE_TOKENS_BY_SCHEDULER), and the n-gram lengths looked up
    speculative_tokens: SpeculativeTokens | None = None
    prompt_lookup_min: LookupLength = PROMPT_LOOKUP_MIN
    prompt_lookup_max: LookupLength = PROMPT_LOOKUP_MAX
    # testing, batch: every logit moves by a seeded draw of up to half this (0: off), as another
    # CPU kind's kernels move them (tests/test_agent_clis.py runs under it)
    logit_noise: LogitNoise = 0.0
    tool_parser: ToolParserName = "auto"  # "auto": read off the chat template
    reasoning_parser: ReasoningParserName = "auto"  # likewise
    adapters: Mapping[str, Path] = field(default_factory=dict)  # LoRA: served name -> file
    # Encoders (embedding, reranker); "auto" reads the kind off the folder.
    kind: ModelKind = "auto"
    pooling: Pooling | None = None  # None: as the folder says
    normalize: bool | None = None  # None: as the folder says
    max_inputs: AtLeastOne = 512  # inputs (texts, documents, pairs) one request may hold
    batch_tokens: AtLeastOne = 8192  # padded tokens one encoder batch may hold
    batch_wait_ms: Milliseconds = 2.0  # how long a batch waits for requests being tokenized
    # Residency (backends/core/residency.py): loaded with the server or on first use, and
    # unloaded this many seconds after its last request (-1: never by itself).
    load: LoadWhen = "start"
    keep_loaded: KeepLoaded = -1.0

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
    workers: int = 1  # processes serving the same models on this machine (they share its memory)


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
