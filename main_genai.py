"""Launcher: read settings, check the model folder and runtime, then run uvicorn.

    python main_genai.py                      # the embedded demo model on 127.0.0.1:8002
    GENAI_MODEL_DIR=/models/phi3 GENAI_DEVICE=cuda python main_genai.py

Start-up problems print one clear line and exit with status 2 (no traceback).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from types import FrameType

import uvicorn
from pydantic import ValidationError

from backends.errors import StartupError
from backends.model_folder import inspect_model_folder
from backends.providers import detect_available, select_provider
from backends.runtime import import_og, resolve_max_length
from backends.service import InferenceService
from schemas.settings import Settings

log = logging.getLogger("genai.main")


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise StartupError(f"Invalid settings: {problems}") from None


def preflight(settings: Settings) -> None:
    """Fail fast, before binding a port, on what would make loading fail."""
    folder = inspect_model_folder(settings.model_dir)
    og = import_og()
    choice = select_provider(settings.device, detect_available(og))
    resolve_max_length(settings.max_length, folder.context_length)
    log.info(
        "model folder %s looks valid; provider %s (%s)", folder.path, choice.name, choice.reason
    )


class DrainingServer(uvicorn.Server):
    """On SIGTERM/SIGINT: stop admitting (503, /readyz false) but keep the port open, let
    in-flight requests finish for up to ``shutdown_timeout`` s, cancel the rest, then exit.
    A second signal exits at once."""

    def __init__(self, config: uvicorn.Config, service: InferenceService, timeout: float):
        super().__init__(config)
        self.service = service
        self.shutdown_timeout = timeout
        self._drain_task: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain_task is not None or self.should_exit:
            super().handle_exit(sig, frame)
            return
        log.info("signal %s: draining (up to %.0f s)", sig, self.shutdown_timeout)
        self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        cancelled = await self.service.drain(self.shutdown_timeout)
        log.info("drained; %d request(s) cancelled; shutting down", cancelled)
        self.should_exit = True


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = load_settings()
        logging.getLogger().setLevel(settings.log_level.upper())
        preflight(settings)
    except StartupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    if settings.reload or settings.workers > 1:
        # Each worker process builds its own app (and loads its own model) from the same env;
        # uvicorn's own graceful shutdown applies (GENAI_SHUTDOWN_TIMEOUT).
        uvicorn.run(
            "app_onnx_genai:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            reload=settings.reload,
            workers=None if settings.reload else settings.workers,
            log_level=settings.log_level,
            timeout_graceful_shutdown=int(settings.shutdown_timeout) or None,
        )
        return 0

    from app_onnx_genai import create_app

    app = create_app(settings)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level
    )
    DrainingServer(config, app.state.service, settings.shutdown_timeout).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
