"""Run ``main_genai.py`` as a real server process on a free port (for contract tests)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(**env: str) -> dict[str, str]:
    merged = {k: v for k, v in os.environ.items() if not k.startswith("GENAI_")}
    merged.update(env)
    return merged


@contextmanager
def live_server(timeout: float = 60.0, **env: str) -> Iterator[str]:
    """Start the server, wait for /healthz 200, yield its base URL, stop it with SIGTERM."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "main_genai.py"],
        cwd=ROOT,
        env=server_env(PORT=str(port), HOST="127.0.0.1", **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"server exited early:\n{proc.stdout.read() if proc.stdout else ''}"
                )
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("server did not become healthy")
            time.sleep(0.1)
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()
