"""``BENCH_SERVER_LOGS=DIR``: every server a benchmark starts writes into a file there, named
by its arm and port, that outlives the run (with ``LOG_LEVEL=debug``, a step trace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.server import ServerProcess

pytestmark = pytest.mark.unit

# Stands in for the server: says which log level it was given, and exits.
FAKE = "import os\nprint('log level', os.environ['LOG_LEVEL'], flush=True)\n"


def run(tmp_path: Path, name: str) -> ServerProcess:
    (tmp_path / "main_genai.py").write_text(FAKE)
    server = ServerProcess(name, {}, cwd=tmp_path)
    server.start()
    server.wait(30)
    return server


def test_with_a_folder_each_servers_output_is_kept_there_by_arm_and_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    monkeypatch.setenv("BENCH_SERVER_LOGS", str(logs))
    monkeypatch.setenv("LOG_LEVEL", "debug")
    server = run(tmp_path, "step=0 c8/ours")
    assert "log level debug" in server.output()
    server.stop()
    kept = logs / f"step=0_c8_ours-{server.port}.log"
    assert kept.read_text() == "log level debug\n"


def test_without_it_the_output_goes_with_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BENCH_SERVER_LOGS", raising=False)
    monkeypatch.delenv("LOG_LEVEL", raising=False)
    server = run(tmp_path, "arm")
    assert server.output() == "log level warning\n"  # the benchmark's own level
    server.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main_genai.py"]
