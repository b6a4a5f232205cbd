"""Launcher: read settings (flags over env over .env), check the model folder, the runtime and
the address, then run uvicorn.

    python main_genai.py                      # the embedded demo model on 127.0.0.1:8002
    python main_genai.py --model-dir /models/phi3 --device cuda --port 9000
    python main_genai.py --help               # every setting, its env name and default
    python main_genai.py export SOURCE --out DIR   # a Hugging Face model to a GenAI folder
    python main_genai.py pull ORG/REPO[:VARIANT]   # a hub repo's variant for this machine

Start-up problems print one clear line and exit with status 2 (no traceback).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any, get_args

import uvicorn
from pydantic import SecretStr, ValidationError
from pydantic_core import ErrorDetails

from backends.config import service_configs
from backends.core.registry import ModelRegistry
from backends.errors import StartupError
from backends.models.encoder import read_model_encoder, serves_encoder
from backends.models.folder import inspect_model_folder
from backends.models.hub import resolve_all
from backends.models.loader import check_adapters, import_og, resolve_max_length
from backends.models.providers import detect_available, select_provider
from config.cli import parse_args
from config.models_file import served_model_fields
from config.settings import (
    PARTS,
    Settings,
    SettingsError,
    env_name,
    split_csv,
    unknown_env_names,
)
from routes.http.slow_clients import server_options
from routes.responses.state import open_store

log = logging.getLogger("genai.main")


# Settings whose value is a secret: API keys, and the Responses DSN (its password).
_SECRET = {
    name
    for part in PARTS
    for name, field in part.model_fields.items()
    if SecretStr in (field.annotation, *get_args(field.annotation)) or name == "responses_db"
}


def _setting_field(loc: Any) -> tuple[str, str] | None:
    """The setting a location names (by field or environment name): its field and env names."""
    for part in PARTS:
        for name, field in part.model_fields.items():
            if loc in (name, env_name(field)):
                return name, env_name(field)
    return None


def _setting_names(loc: Any) -> str:
    found = _setting_field(loc)
    return f"{found[1]} / --{found[0].replace('_', '-')}" if found else str(loc)


def _is_secret(loc: Any) -> bool:
    found = _setting_field(loc)
    return found is not None and found[0] in _SECRET


def _problem(error: ErrorDetails) -> str:
    """One invalid setting in words: its names and pydantic's message, never the value given
    (pydantic's ``input_value``), and no secret (a key, a DSN) that a message might quote."""
    loc, given = error["loc"], error["input"]
    message = error["msg"].removeprefix("Value error, ")
    if loc:  # a field's own check
        secrets = [given] if _is_secret(loc[0]) else []
    else:  # a check across fields (a model validator): given is every value
        fields = given.items() if isinstance(given, dict) else ()
        secrets = [value for key, value in fields if _is_secret(key)]
    for secret in secrets:
        text = str(secret.get_secret_value() if isinstance(secret, SecretStr) else secret)
        userinfo = text.partition("://")[2].rpartition("@")[0]  # a DSN's user:password
        pieces = {text, *split_csv(text), userinfo, userinfo.partition(":")[2]}
        for piece in sorted(pieces, key=len, reverse=True):
            if len(piece) >= 4:  # shorter, *** would stand for letters of every word
                message = message.replace(piece, "***")
    return f"{_setting_names(loc[0])}: {message}" if loc else message


def load_settings(overrides: dict[str, Any]) -> Settings:
    try:
        return Settings.load(**overrides)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors(include_url=False))
        raise StartupError(" ".join(f"Invalid settings: {problems}".split())) from None  # one line


def warn_unknown_env() -> None:
    for name, closest in unknown_env_names():
        hint = f"; did you mean {closest}?" if closest else ""
        log.warning("%s is not a setting and is ignored%s", name, hint)


def preflight(settings: Settings) -> None:
    """Fail fast, before binding a port, on what would make loading fail (every model, the
    stored Responses' file)."""
    if settings.server.responses_db is not None:
        open_store(settings.server).close()
    og = import_og()
    configs = service_configs(served_model_fields(settings), settings.server.limits())
    for config in resolve_all(configs):  # hf:ORG/REPO: fetched here if not in the cache
        model = config.model
        if serves_encoder(model):
            spec = read_model_encoder(model)
            log.info("model %r: a %s model (%s pooling)", model.name, spec.kind, spec.pooling)
            continue
        choice = select_provider(model.device, detect_available(og))
        folder = inspect_model_folder(model.path, provider=choice.name, variant=model.variant)
        resolve_max_length(model.max_length, folder.context_length)
        check_adapters(model)
        log.info(
            "model %r: folder %s looks valid; provider %s (%s)",
            model.name,
            folder.path,
            choice.name,
            choice.reason,
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """Listen where the settings say, before the model loads; a clear error if we cannot."""
    where = f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise StartupError(f"Cannot listen on {where}: unknown host ({exc.strerror}).") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        hint = (
            " Is another server using it? Set PORT or --port."
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise StartupError(f"Cannot listen on {where}: {exc.strerror}.{hint}") from None
    sock.set_inheritable(True)
    return sock


class DrainingServer(uvicorn.Server):
    """On SIGTERM/SIGINT: stop admitting (503, /readyz false) but keep the port open, let
    in-flight requests finish for up to ``shutdown_timeout`` s, cancel the rest, then exit.
    A second signal exits at once."""

    def __init__(self, config: uvicorn.Config, models: ModelRegistry, timeout: float):
        super().__init__(config)
        self.models = models
        self.shutdown_timeout = timeout
        self._drain_task: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain_task is not None or self.should_exit:
            super().handle_exit(sig, frame)
            return
        log.info("signal %s: draining (up to %.0f s)", sig, self.shutdown_timeout)
        self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        cancelled = await self.models.drain(self.shutdown_timeout)
        log.info("drained; %d request(s) cancelled; shutting down", cancelled)
        self.should_exit = True


def export_settings(settings: Settings) -> None:
    """Put every setting in the environment, whatever its source (flag, env, .env): worker
    processes that uvicorn starts build their own app from the environment."""
    for part in (settings.model, settings.server):
        for name, field in type(part).model_fields.items():
            value = getattr(part, name)
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            text = str(value).lower() if isinstance(value, bool) else str(value)
            os.environ[env_name(field)] = text


def run_workers(settings: Settings) -> None:
    """Several processes (or the reloader), each with its own app and model."""
    export_settings(settings)
    server = settings.server
    bind_socket(server.host, server.port).close()  # uvicorn binds again in a moment
    uvicorn.run(
        "app_onnx_genai:create_app",
        factory=True,
        host=server.host,
        port=server.port,
        reload=server.reload,
        workers=None if server.reload else server.workers,
        log_level=server.log_level,
        timeout_graceful_shutdown=int(server.shutdown_timeout) or None,
        **server_options(server.client_timeout, server.max_connections),
    )


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["export"]:  # a subcommand with its own flags, not the server's
        from modelkit.export import main as export_main

        return export_main(args[1:])
    if args[:1] == ["pull"]:
        from backends.models.hub import main as pull_main

        return pull_main(args[1:])
    overrides = parse_args(argv)
    try:
        settings = load_settings(overrides)
        logging.getLogger().setLevel(settings.server.log_level.upper())
        warn_unknown_env()
        preflight(settings)
        if settings.server.reload or settings.server.workers > 1:
            run_workers(settings)
            return 0
        sock = bind_socket(settings.server.host, settings.server.port)
    except (StartupError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from app_onnx_genai import create_app

    app = create_app(settings)
    if app.state.kv_events is not None:
        try:  # here, so that an endpoint in use is one line, as a port in use is
            app.state.kv_events.start()
        except StartupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    server = settings.server
    config = uvicorn.Config(
        app,
        host=server.host,
        port=server.port,
        log_level=server.log_level,
        **server_options(server.client_timeout, server.max_connections),
    )
    log.info("listening on http://%s:%d", server.host, server.port)
    DrainingServer(config, app.state.models, server.shutdown_timeout).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
