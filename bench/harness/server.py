"""Real server processes (``main_genai.py``) on free ports: the one helper the benchmark and
the live tests share to start, poll and stop a server."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ClassVar

import httpx

from bench.harness.paths import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**env: str) -> dict[str, str]:
    """This process's environment without its GENAI_* settings, plus ``env``."""
    merged = {k: v for k, v in os.environ.items() if not k.upper().startswith("GENAI_")}
    merged.update(env)
    return merged


def settings(text: str) -> dict[str, str]:
    """``NAME=VALUE[,NAME=VALUE...]``, the server settings of one benchmark arm; a NAME that
    is no environment variable's name (``label:NAME``, where no label is taken) is refused."""
    pairs = [item.partition("=") for item in text.split(",")]
    for name, eq, _ in pairs:
        if not eq or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            raise ValueError(f"{name!r} in {text!r} is not NAME=VALUE with an environment name")
    return {name: value for name, _, value in pairs}


def server_settings_fields() -> set[str]:
    """Environment names the server's settings accept."""
    sys.path.insert(0, str(ROOT))
    try:
        from config.settings import env_names
    finally:
        sys.path.remove(str(ROOT))
    return set(env_names())


@dataclass
class ServerProcess:
    name: str
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    args: list[str] = field(default_factory=list)
    log_level: str = "warning"
    cwd: Path = ROOT  # the checkout whose main_genai.py runs: another one to compare commits
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    error: str | None = None
    health: ClassVar[str] = "/healthz"  # answers 200 once the server serves
    ready_within: ClassVar[float] = 180.0  # seconds wait_ready waits by default

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = clean_env(**self.env, PORT=str(self.port), HOST="127.0.0.1")
        env.setdefault("LOG_LEVEL", self.log_level)
        self.log = self._log_file()
        self.proc = subprocess.Popen(
            [sys.executable, "main_genai.py", *self.args],
            cwd=self.cwd,
            env=env,
            stdout=self.log,
            stderr=self.log,
        )

    def _log_file(self) -> IO[bytes]:
        """Where the server writes: a temporary file, or with ``BENCH_SERVER_LOGS=DIR`` a file
        there named by the arm and port, kept after the run (with ``LOG_LEVEL=debug`` too, a
        trace of every batch step)."""
        folder = os.environ.get("BENCH_SERVER_LOGS")
        if not folder:
            return tempfile.TemporaryFile()
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.name)
        return open(path / f"{name}-{self.port}.log", "wb+")  # closed in stop()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """True once ``health`` answers 200; False (with ``error`` set) if the server died,
        failed to load its model, or was not ready within ``timeout`` (``ready_within``)."""
        assert self.proc is not None
        deadline = time.monotonic() + (timeout or self.ready_within)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.error = f"exited with {self.proc.returncode}: {self.output()[-400:]}"
                return False
            try:
                r = httpx.get(self.url + self.health, timeout=2)
                if r.status_code == 200:
                    return True
                if self.failed_to_load(r):
                    self.error = f"model failed to load: {self.output()[-400:]}"
                    return False
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)
        self.error = "not healthy in time"
        return False

    def failed_to_load(self, health: httpx.Response) -> bool:
        """Whether a health answer other than 200 says the model will not load."""
        return bool(health.json().get("status") == "error")

    def output(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def routes(self) -> set[str]:
        try:
            return set(httpx.get(self.url + "/openapi.json", timeout=5).json()["paths"])
        except (httpx.HTTPError, ValueError, KeyError):
            return set()

    def terminate(self) -> None:
        """SIGTERM: the server drains, then exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


@contextmanager
def live_server(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
    log_level: str = "warning",
    **more_env: str,
) -> Iterator[ServerProcess]:
    """A started, healthy server (flags ``args``, settings ``env`` and ``more_env``), stopped
    afterwards."""
    server = ServerProcess(
        "live", {**(env or {}), **more_env}, args=list(args), log_level=log_level
    )
    server.start()
    try:
        if not server.wait_ready(timeout):
            raise RuntimeError(f"server did not start: {server.error}")
        yield server
    finally:
        server.stop()


def start_all(servers: list[ServerProcess]) -> list[ServerProcess]:
    """Start every server at once (loading overlaps), return those that became healthy."""
    for s in servers:
        s.start()
    return [s for s in servers if s.wait_ready()]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc), for server-side CPU accounting."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")
