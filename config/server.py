"""How the server is served (:class:`ServerSettings`), in groups: bind, access, the inference
gateway, browsers, connections, audio, limits, images (config/media.py), the Responses store
and profiling.

Each group is a settings class of its own; :class:`ServerSettings` inherits them all, so every
field keeps its one environment name, its flag and its flat attribute (``settings.server.port``).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings

from backends.config import SamplingDefaultsName
from config.fields import SETTINGS_CONFIG, setting, split_csv
from config.kv_endpoint import KVEventsSocket, connects_to_self, kv_events_socket, parse_endpoint
from config.media import AudioSettings, ImageSettings
from config.responses_db import served_location


class BindSettings(BaseSettings):
    """Where and how the server process runs."""

    model_config = SETTINGS_CONFIG

    host: str = setting("127.0.0.1", "HOST", "host", "Address to bind.")
    port: int = setting(8002, "PORT", "port", "Port to bind.", ge=1, le=65535)
    reload: bool = setting(
        False, "RELOAD", "reload", "Auto-reload on code changes (development; one worker)."
    )
    workers: int = setting(
        1, "WORKERS", "workers", "Worker processes, each with its own copy of the model.", ge=1
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = setting(
        "info", "LOG_LEVEL", "log_level", "critical, error, warning, info or debug."
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class AccessSettings(BaseSettings):
    """Who may call what: the API keys, and the routes that may go without one."""

    model_config = SETTINGS_CONFIG

    api_key: SecretStr | None = setting(
        None,
        "GENAI_API_KEY",
        "api_key",
        "API keys, comma-separated; requests then need `Authorization: Bearer <key>`.",
    )
    admin_api_key: SecretStr | None = setting(
        None,
        "GENAI_ADMIN_API_KEY",
        "admin_api_key",
        "Admin keys, comma-separated: the only keys the /admin routes take (a GENAI_API_KEY "
        "key gets 403 there); they also do all a user key does.",
    )
    admin: bool | None = setting(
        None,
        "GENAI_ADMIN",
        "admin",
        "The /admin routes (list, cancel, profile, load): on when a key is set (then for the "
        "admin keys alone), else off; true or false overrides.",
    )
    model_root: Path | None = setting(
        None,
        "GENAI_MODEL_ROOT",
        "model_root",
        "The folder POST /admin/models loads models from (relative paths are taken under it; "
        "a path outside it is refused); unset: no loading at runtime.",
    )
    max_models: int = setting(
        8,
        "GENAI_MAX_MODELS",
        "max_models",
        "Models served at once at most (adapters not counted); POST /admin/models beyond it "
        "gets 400.",
        ge=1,
    )
    metrics_open: bool = setting(
        False,
        "GENAI_METRICS_OPEN",
        "metrics_open",
        "/metrics without the API key, for the inference gateway's endpoint picker (it scrapes "
        "with none); false: it needs the key when one is set.",
    )
    render_open: bool = setting(
        False,
        "GENAI_RENDER_OPEN",
        "render_open",
        "The render routes (/v1/chat/completions/render, /v1/completions/render: a prompt's "
        "token ids, nothing generated) without the API key, for the endpoint picker's token "
        "producer (precise prefix routing); false: they need the key when one is set.",
    )

    @field_validator("api_key", "admin_api_key", mode="after")
    @classmethod
    def _some_key(cls, value: SecretStr | None) -> SecretStr | None:
        # A blank key must not quietly mean "no authentication".
        if value is not None and not split_csv(value.get_secret_value()):
            raise ValueError("holds no key; give one (or several, comma-separated) or unset it")
        return value

    @property
    def api_keys(self) -> list[str]:
        return split_csv(self.api_key.get_secret_value() if self.api_key else None)

    @property
    def admin_keys(self) -> list[str]:
        return split_csv(self.admin_api_key.get_secret_value() if self.admin_api_key else None)

    @property
    def admin_enabled(self) -> bool:
        keyed = bool(self.api_keys or self.admin_keys)
        return self.admin if self.admin is not None else keyed


class GatewaySettings(BaseSettings):
    """The inference gateway's KV-cache events (precise prefix routing)."""

    model_config = SETTINGS_CONFIG

    kv_events_endpoint: str = setting(
        "",
        "GENAI_KV_EVENTS_ENDPOINT",
        "kv_events_endpoint",
        "ZMQ endpoint the batch scheduler publishes KV-cache events on (llm-d's format, for "
        "precise prefix routing; they carry every prompt's token ids): tcp://*:5557 binds port "
        "5557 of POD_IP, else of HOST; tcp://0.0.0.0:5557 binds every interface; "
        "tcp://HOST:5557 connects to a subscriber that binds; ipc://PATH binds a Unix socket; "
        "empty: no events.",
    )
    kv_events_topic: str = setting(
        "kv@{pod_ip}:{port}@{model}",
        "GENAI_KV_EVENTS_TOPIC",
        "kv_events_topic",
        "Each model's KV-event topic: {pod_ip} is POD_IP, {port} the server's port, {model} "
        "the model's served name.",
    )
    pod_ip: str = setting(
        "",
        "POD_IP",
        "pod_ip",
        "This pod's IP (Kubernetes' status.podIP), for the KV-event topic and where "
        "tcp://*:PORT binds; empty: the topic has the address the host name resolves to, and "
        "tcp://*:PORT binds HOST.",
    )

    @field_validator("kv_events_endpoint", mode="after")
    @classmethod
    def _zmq_endpoint(cls, value: str) -> str:
        value = value.strip()
        if value:
            parse_endpoint(value)  # config/kv_endpoint.py: a ValueError says what is wrong
        return value

    @field_validator("pod_ip", mode="after")
    @classmethod
    def _an_ip(cls, value: str, info: ValidationInfo) -> str:
        value = value.strip()
        if value:
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an IP address") from None
        endpoint = info.data.get("kv_events_endpoint")  # validated before this field
        if endpoint and connects_to_self(parse_endpoint(endpoint), value):
            raise ValueError(
                f"GENAI_KV_EVENTS_ENDPOINT={endpoint} would connect to this pod's own address; "
                "tcp://*:PORT binds it"
            )
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


class BrowserSettings(BaseSettings):
    """What browsers get: CORS and the web playground."""

    model_config = SETTINGS_CONFIG

    cors_origins: str = setting(
        "",
        "GENAI_CORS_ORIGINS",
        "cors_origins",
        "Browser origins allowed to call the API, comma-separated, or *; empty: no CORS.",
    )
    web_ui: bool = setting(
        True,
        "GENAI_WEB_UI",
        "web_ui",
        "The web playground at / (a chat page over the OpenAI API; its static files are open, "
        "its API calls need the key like any client's); false: no page.",
    )


class ConnectionSettings(BaseSettings):
    """What one connection may take: time, count and body size."""

    model_config = SETTINGS_CONFIG

    client_timeout: float = setting(
        15.0,
        "GENAI_CLIENT_TIMEOUT",
        "client_timeout",
        "Seconds a client has to send a request's headers, and again its body; slower "
        "connections are closed (a late body gets 408).",
        gt=0,
    )
    max_connections: int = setting(
        256,
        "GENAI_MAX_CONNECTIONS",
        "max_connections",
        "Open connections at most; beyond that new requests get 503 at once.",
        ge=1,
    )
    max_body_mib: float = setting(
        16.0,
        "GENAI_MAX_BODY_MIB",
        "max_body_mib",
        "Largest request body accepted, in MiB; larger ones get 413 before they are read.",
        gt=0,
    )


class LimitSettings(BaseSettings):
    """What the server admits, and the defaults requests get."""

    model_config = SETTINGS_CONFIG

    default_max_tokens: int = setting(
        8192,
        "GENAI_DEFAULT_MAX_TOKENS",
        "default_max_tokens",
        "Tokens a request that sets no max_tokens may generate: the room left in the context, "
        "at most this many.",
        gt=0,
    )
    sampling_defaults: SamplingDefaultsName = setting(
        "model",
        "GENAI_SAMPLING_DEFAULTS",
        "sampling_defaults",
        "What a request that leaves out temperature, top_p, top_k or the repetition penalty "
        "gets: model (the model folder's own defaults, its genai_config.json search section: "
        "greedy unless it says do_sample) or api (each API's own documented default, e.g. "
        "temperature 1 on OpenAI's).",
    )
    max_concurrency: int = setting(
        8,
        "GENAI_MAX_CONCURRENCY",
        "max_concurrency",
        "Sequences generating at once; more wait in arrival order.",
        ge=1,
    )
    max_queue: int = setting(
        64,
        "GENAI_MAX_QUEUE",
        "max_queue",
        "Sequences allowed to wait; beyond running + waiting: 429 with Retry-After.",
        ge=0,
    )
    request_timeout: float | None = setting(
        None,
        "GENAI_REQUEST_TIMEOUT",
        "request_timeout",
        "Seconds a request may take in all, queue included; unset: no limit.",
        gt=0,
    )
    shutdown_timeout: float = setting(
        30.0,
        "GENAI_SHUTDOWN_TIMEOUT",
        "shutdown_timeout",
        "Seconds in-flight requests get to finish after SIGTERM before they are cancelled.",
        ge=0,
    )
    sse_ping: float = setting(
        15.0, "GENAI_SSE_PING", "sse_ping", "Seconds between keep-alive comments.", gt=0
    )


class ResponsesStoreSettings(BaseSettings):
    """The stored Responses (store: true, previous_response_id)."""

    model_config = SETTINGS_CONFIG

    responses_db: str | None = setting(
        None,
        "GENAI_RESPONSES_DB",
        "responses_db",
        "Where stored Responses (store: true, previous_response_id) are kept: a SQLite file, "
        "kept across restarts and shared by the processes of one host (on a local disk), or a "
        "PostgreSQL URL (postgresql://user@host/db), shared by replicas on any host; unset: in "
        "memory, per process.",
        min_length=1,
    )
    responses_max: int = setting(
        1000,
        "GENAI_RESPONSES_MAX",
        "responses_max",
        "Stored Responses kept at most; past it the oldest go first.",
        ge=1,
    )
    responses_max_mib: float = setting(
        64.0,
        "GENAI_RESPONSES_MAX_MIB",
        "responses_max_mib",
        "Stored Responses' size at most (their JSON, in MiB); past it the oldest go first.",
        gt=0,
    )
    responses_key_max: int | None = setting(
        None,
        "GENAI_RESPONSES_KEY_MAX",
        "responses_key_max",
        "Stored Responses one API key keeps at most; past it that key's oldest go first, never "
        "another key's. Unset: a quarter of GENAI_RESPONSES_MAX.",
        ge=1,
    )
    responses_key_max_mib: float | None = setting(
        None,
        "GENAI_RESPONSES_KEY_MAX_MIB",
        "responses_key_max_mib",
        "Stored Responses' size one API key keeps at most (MiB); past it that key's oldest go "
        "first. Unset: a quarter of GENAI_RESPONSES_MAX_MIB.",
        gt=0,
    )
    responses_ttl: float = setting(
        86400.0,
        "GENAI_RESPONSES_TTL",
        "responses_ttl",
        "Seconds a stored Response is kept after it was made.",
        gt=0,
    )
    responses_timeout: float = setting(
        3.0,
        "GENAI_RESPONSES_TIMEOUT",
        "responses_timeout",
        "Seconds a stored Responses' call may take (its database hung or down) before it is a "
        "503; routes that do not use the store never wait for it.",
        gt=0,
        le=60,
    )

    @field_validator("responses_db", mode="before")
    @classmethod
    def _path_or_url(cls, value: object) -> object:
        # A file may be given as a path (a URL may not: Path folds its "//").
        return str(value) if isinstance(value, os.PathLike) else value

    @field_validator("responses_db", mode="after")
    @classmethod
    def _served(cls, value: str | None) -> str | None:
        # A URL we do not serve is refused, never taken as a file's path (config/responses_db.py).
        return None if value is None else served_location(value)


class ProfilingSettings(BaseSettings):
    """onnxruntime's profiles (the /admin profiling window)."""

    model_config = SETTINGS_CONFIG

    profile_dir: Path = setting(
        Path("profiles"), "GENAI_PROFILE_DIR", "profile_dir", "Where ORT profiles are written."
    )
    profile_max_files: int = setting(
        50, "GENAI_PROFILE_MAX_FILES", "profile_max_files", "ORT profile files kept.", ge=1
    )


# pydantic takes a later base's fields first: the groups are listed last to first, so that the
# flags, .env.example and the docs keep the order they are read in.
class ServerSettings(
    ProfilingSettings,
    ResponsesStoreSettings,
    ImageSettings,
    LimitSettings,
    AudioSettings,
    ConnectionSettings,
    BrowserSettings,
    GatewaySettings,
    AccessSettings,
    BindSettings,
):
    """How the server is served, in groups; every field keeps its flat name (``server.port``)."""

    def limits(self) -> dict[str, Any]:
        """What the server admits, and the defaults requests get, named as the core's
        ``Limits`` names them."""
        return {
            "max_concurrency": self.max_concurrency,
            "max_queue": self.max_queue,
            "request_timeout": self.request_timeout,
            "default_max_tokens": self.default_max_tokens,
            "sampling_defaults": self.sampling_defaults,
            "workers": self.workers,
        }

    def kv_events_topic_for(self, model: str, host_ip: str) -> str:
        """The KV-event topic of ``model``; ``host_ip`` stands in for an unset POD_IP."""
        return self.kv_events_topic.format(
            pod_ip=self.pod_ip or host_ip, port=self.port, model=model
        )

    def kv_events_socket(self) -> KVEventsSocket:
        """The socket GENAI_KV_EVENTS_ENDPOINT asks for; ``tcp://*`` binds POD_IP, else HOST."""
        return kv_events_socket(self.kv_events_endpoint, self.pod_ip, self.host)

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
