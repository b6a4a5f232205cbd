"""Settings, in two parts, read from the environment and `.env`, validated at start.

- :class:`ModelSettings`: what is served and how it runs (folder, name, device, threads, max
  length, scheduler, cache);
- :class:`ServerSettings`: how it is served (bind address, workers, auth, CORS, limits).

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
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from backends.config import (
    AtLeastOne,
    Count,
    Device,
    KvCacheMib,
    LookupLength,
    ModelConfig,
    Name,
    PrefillChunk,
    PrefillOverlap,
    PrefixStoreMib,
    ReasoningParserName,
    SamplingDefaultsName,
    SchedulerName,
    SpeculativeTokens,
    Tokens,
    ToolParserName,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_MODEL_DIR = REPO_ROOT / "models" / "demo-llama"
ENV_FILE = ".env"

# A model setting's type, bounds and default are its ModelConfig field's: declared once there.
_CORE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
KV_EVENT_TRANSPORTS = ("tcp://", "ipc://", "inproc://")  # what a ZMQ endpoint may start with


def split_csv(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _setting(default: Any, env: str, field: str, description: str, **kw: Any) -> Any:
    """A field read from ``env`` (or, when given by name, ``field``)."""
    return Field(
        default,
        validation_alias=AliasChoices(env, field),
        description=description,
        **kw,
    )


def _model_setting(env: str, field: str, description: str, core: str | None = None) -> Any:
    """A model setting: its ModelConfig field (``field``, unless ``core`` names another) gives
    its default, and its annotation (the core's type) its bounds."""
    return _setting(_CORE_DEFAULTS[core or field], env, field, description)


_CONFIG = SettingsConfigDict(
    env_file=ENV_FILE, env_file_encoding="utf-8", extra="ignore", populate_by_name=True
)


class ModelSettings(BaseSettings):
    model_config = _CONFIG

    model_dir: Path = _setting(
        DEMO_MODEL_DIR, "GENAI_MODEL_DIR", "model_dir", "Model folder (genai_config.json, ...)."
    )
    models_file: Path | None = _setting(
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
        core="variant",
    )
    model_name: Name = _model_setting(
        "GENAI_MODEL_NAME",
        "model_name",
        "Name the model is served under; a request naming another model gets 404.",
        core="name",
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
    kv_cache_mib: KvCacheMib = _model_setting(
        "GENAI_KV_CACHE_MIB",
        "kv_cache_mib",
        "batch scheduler: KV cache memory for all slots, in MiB, reserved at start; the "
        "tokens per sequence are the max length or what this budget gives each slot.",
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
        "off; unset: the scheduler's default (docs/speculation.md). A request may override it "
        "(its `speculative` object).",
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
    prefix_store_mib: PrefixStoreMib = _model_setting(
        "GENAI_PREFIX_STORE_MIB",
        "prefix_store_mib",
        "batch scheduler: host-RAM prefix store (MiB): the KV cache of rows given up is kept "
        "there in 32-token blocks (LRU) for later prompts that share their prefix; 0 disables.",
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


class ServerSettings(BaseSettings):
    model_config = _CONFIG

    host: str = _setting("127.0.0.1", "HOST", "host", "Address to bind.")
    port: int = _setting(8002, "PORT", "port", "Port to bind.", ge=1, le=65535)
    reload: bool = _setting(
        False, "RELOAD", "reload", "Auto-reload on code changes (development; one worker)."
    )
    workers: int = _setting(
        1, "WORKERS", "workers", "Worker processes, each with its own copy of the model.", ge=1
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = _setting(
        "info", "LOG_LEVEL", "log_level", "critical, error, warning, info or debug."
    )
    api_key: SecretStr | None = _setting(
        None,
        "GENAI_API_KEY",
        "api_key",
        "API keys, comma-separated; requests then need `Authorization: Bearer <key>`.",
    )
    admin: bool | None = _setting(
        None,
        "GENAI_ADMIN",
        "admin",
        "The /admin routes (list, cancel, profile): on when an API key is set (behind it), "
        "else off; true or false overrides.",
    )
    metrics_open: bool = _setting(
        False,
        "GENAI_METRICS_OPEN",
        "metrics_open",
        "/metrics without the API key, for the inference gateway's endpoint picker (it scrapes "
        "with none); false: it needs the key when one is set.",
    )
    render_open: bool = _setting(
        False,
        "GENAI_RENDER_OPEN",
        "render_open",
        "The render routes (/v1/chat/completions/render, /v1/completions/render: a prompt's "
        "token ids, nothing generated) without the API key, for the endpoint picker's token "
        "producer (precise prefix routing); false: they need the key when one is set.",
    )
    kv_events_endpoint: str = _setting(
        "",
        "GENAI_KV_EVENTS_ENDPOINT",
        "kv_events_endpoint",
        "ZMQ endpoint the batch scheduler publishes KV-cache events on (llm-d's format, for "
        "precise prefix routing): tcp://*:5557 binds it, tcp://HOST:5557 connects to it; "
        "empty: no events.",
    )
    kv_events_topic: str = _setting(
        "kv@{pod_ip}:{port}@{model}",
        "GENAI_KV_EVENTS_TOPIC",
        "kv_events_topic",
        "Each model's KV-event topic: {pod_ip} is POD_IP, {port} the server's port, {model} "
        "the model's served name.",
    )
    pod_ip: str = _setting(
        "",
        "POD_IP",
        "pod_ip",
        "This pod's IP (Kubernetes' status.podIP), for the KV-event topic; empty: the address "
        "the host name resolves to.",
    )
    cors_origins: str = _setting(
        "",
        "GENAI_CORS_ORIGINS",
        "cors_origins",
        "Browser origins allowed to call the API, comma-separated, or *; empty: no CORS.",
    )
    web_ui: bool = _setting(
        True,
        "GENAI_WEB_UI",
        "web_ui",
        "The web playground at / (a chat page over the OpenAI API; its static files are open, "
        "its API calls need the key like any client's); false: no page.",
    )
    client_timeout: float = _setting(
        15.0,
        "GENAI_CLIENT_TIMEOUT",
        "client_timeout",
        "Seconds a client has to send a request's headers, and again its body; slower "
        "connections are closed (a late body gets 408).",
        gt=0,
    )
    max_connections: int = _setting(
        256,
        "GENAI_MAX_CONNECTIONS",
        "max_connections",
        "Open connections at most; beyond that new requests get 503 at once.",
        ge=1,
    )
    max_body_mib: float = _setting(
        16.0,
        "GENAI_MAX_BODY_MIB",
        "max_body_mib",
        "Largest request body accepted, in MiB; larger ones get 413 before they are read.",
        gt=0,
    )
    max_audio_mib: float = _setting(
        25.0,
        "GENAI_MAX_AUDIO_MIB",
        "max_audio_mib",
        "Largest audio upload for /v1/audio/transcriptions, in MiB (413 beyond; the request "
        "body limit GENAI_MAX_BODY_MIB applies first).",
        gt=0,
    )
    max_audio_seconds: float = _setting(
        600.0,
        "GENAI_MAX_AUDIO_SECONDS",
        "max_audio_seconds",
        "Longest audio a transcription accepts, in seconds (400 beyond).",
        gt=0,
    )
    default_max_tokens: int = _setting(
        8192,
        "GENAI_DEFAULT_MAX_TOKENS",
        "default_max_tokens",
        "Tokens a request that sets no max_tokens may generate: the room left in the context, "
        "at most this many.",
        gt=0,
    )
    sampling_defaults: SamplingDefaultsName = _setting(
        "model",
        "GENAI_SAMPLING_DEFAULTS",
        "sampling_defaults",
        "What a request that leaves out temperature, top_p, top_k or the repetition penalty "
        "gets: model (the model folder's own defaults, its genai_config.json search section: "
        "greedy unless it says do_sample) or api (each API's own documented default, e.g. "
        "temperature 1 on OpenAI's).",
    )
    max_concurrency: int = _setting(
        8,
        "GENAI_MAX_CONCURRENCY",
        "max_concurrency",
        "Sequences generating at once; more wait in arrival order.",
        ge=1,
    )
    max_queue: int = _setting(
        64,
        "GENAI_MAX_QUEUE",
        "max_queue",
        "Sequences allowed to wait; beyond running + waiting: 429 with Retry-After.",
        ge=0,
    )
    request_timeout: float | None = _setting(
        None,
        "GENAI_REQUEST_TIMEOUT",
        "request_timeout",
        "Seconds a request may take in all, queue included; unset: no limit.",
        gt=0,
    )
    shutdown_timeout: float = _setting(
        30.0,
        "GENAI_SHUTDOWN_TIMEOUT",
        "shutdown_timeout",
        "Seconds in-flight requests get to finish after SIGTERM before they are cancelled.",
        ge=0,
    )
    sse_ping: float = _setting(
        15.0, "GENAI_SSE_PING", "sse_ping", "Seconds between keep-alive comments.", gt=0
    )
    image_url_hosts: str = _setting(
        "",
        "GENAI_IMAGE_URL_HOSTS",
        "image_url_hosts",
        "Hosts whose http(s) image URLs the server fetches, comma-separated: a name or IP "
        "(exactly that host) or *.example.org (its subdomains). Empty: remote image URLs are "
        "refused (data: URLs always work). Loopback, private and link-local addresses are "
        "fetched only from a host named exactly.",
    )
    image_fetch_timeout: float = _setting(
        10.0,
        "GENAI_IMAGE_FETCH_TIMEOUT",
        "image_fetch_timeout",
        "Seconds one image URL may take to fetch, redirects included.",
        gt=0,
    )
    image_fetch_redirects: int = _setting(
        3,
        "GENAI_IMAGE_FETCH_REDIRECTS",
        "image_fetch_redirects",
        "Redirects followed when fetching an image URL (each checked like the first URL).",
        ge=0,
    )
    max_image_mib: float = _setting(
        20.0,
        "GENAI_MAX_IMAGE_MIB",
        "max_image_mib",
        "Largest image accepted (as sent or fetched), in MiB; larger ones get 413.",
        gt=0,
    )
    max_image_pixels: int = _setting(
        25_000_000,
        "GENAI_MAX_IMAGE_PIXELS",
        "max_image_pixels",
        "Most pixels (width x height) one image may decode to; more gets 413.",
        ge=1,
    )
    max_images: int = _setting(
        8,
        "GENAI_MAX_IMAGES",
        "max_images",
        "Images one request may carry; more gets 413.",
        ge=1,
    )
    responses_db: str | None = _setting(
        None,
        "GENAI_RESPONSES_DB",
        "responses_db",
        "Where stored Responses (store: true, previous_response_id) are kept: a SQLite file, "
        "kept across restarts and shared by the processes of one host (on a local disk), or a "
        "PostgreSQL URL (postgresql://user@host/db), shared by replicas on any host; unset: in "
        "memory, per process.",
        min_length=1,
    )
    responses_max: int = _setting(
        1000,
        "GENAI_RESPONSES_MAX",
        "responses_max",
        "Stored Responses kept at most; past it the oldest go first.",
        ge=1,
    )
    responses_max_mib: float = _setting(
        64.0,
        "GENAI_RESPONSES_MAX_MIB",
        "responses_max_mib",
        "Stored Responses' size at most (their JSON, in MiB); past it the oldest go first.",
        gt=0,
    )
    responses_ttl: float = _setting(
        86400.0,
        "GENAI_RESPONSES_TTL",
        "responses_ttl",
        "Seconds a stored Response is kept after it was made.",
        gt=0,
    )
    profile_dir: Path = _setting(
        Path("profiles"), "GENAI_PROFILE_DIR", "profile_dir", "Where ORT profiles are written."
    )
    profile_max_files: int = _setting(
        50, "GENAI_PROFILE_MAX_FILES", "profile_max_files", "ORT profile files kept.", ge=1
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("responses_db", mode="before")
    @classmethod
    def _path_or_url(cls, value: object) -> object:
        # A file may be given as a path (a URL may not: Path folds its "//").
        return str(value) if isinstance(value, os.PathLike) else value

    @field_validator("api_key", mode="after")
    @classmethod
    def _some_key(cls, value: SecretStr | None) -> SecretStr | None:
        # A blank key must not quietly mean "no authentication".
        if value is not None and not split_csv(value.get_secret_value()):
            raise ValueError("holds no key; give one (or several, comma-separated) or unset it")
        return value

    @field_validator("kv_events_endpoint", mode="after")
    @classmethod
    def _zmq_endpoint(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(KV_EVENT_TRANSPORTS):
            raise ValueError(f"must start with one of {', '.join(KV_EVENT_TRANSPORTS)}")
        return value

    @field_validator("kv_events_topic", mode="after")
    @classmethod
    def _topic_fields(cls, value: str) -> str:
        try:
            value.format(pod_ip="", port=0, model="")
        except (KeyError, IndexError, ValueError) as exc:
            fields = "only {pod_ip}, {port} and {model} are filled in"
            raise ValueError(f"{fields} ({exc!r})") from None
        return value

    def kv_events_topic_for(self, model: str, host_ip: str) -> str:
        """The KV-event topic of ``model``; ``host_ip`` stands in for an unset POD_IP."""
        return self.kv_events_topic.format(
            pod_ip=self.pod_ip or host_ip, port=self.port, model=model
        )

    @property
    def api_keys(self) -> list[str]:
        return split_csv(self.api_key.get_secret_value() if self.api_key else None)

    @property
    def admin_enabled(self) -> bool:
        return self.admin if self.admin is not None else bool(self.api_keys)

    def limits(self) -> dict[str, Any]:
        """What the server admits, and the defaults requests get, named as the core's
        ``Limits`` names them."""
        return {
            "max_concurrency": self.max_concurrency,
            "max_queue": self.max_queue,
            "request_timeout": self.request_timeout,
            "default_max_tokens": self.default_max_tokens,
            "sampling_defaults": self.sampling_defaults,
        }

    @model_validator(mode="after")
    def _reload_means_one_worker(self) -> ServerSettings:
        # uvicorn's reloader runs a single process; several workers would be ignored.
        if self.reload:
            self.workers = 1
        return self

    @model_validator(mode="after")
    def _kv_events_from_one_worker(self) -> ServerSettings:
        # Each worker has its own KV cache, but the picker sees one pod under one topic.
        if self.kv_events_endpoint and self.workers > 1:
            raise ValueError(
                "GENAI_KV_EVENTS_ENDPOINT needs WORKERS=1: each worker holds its own KV cache, "
                "and the endpoint picker would see them as one pod"
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


def env_name(field: FieldInfo) -> str:
    alias = field.validation_alias
    assert isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str)
    return alias.choices[0]


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
