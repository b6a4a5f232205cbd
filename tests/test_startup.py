"""main_genai.py as a subprocess: clear start-up errors with exit status 2, --help, warnings
for misspelled settings, and a real start."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench.harness.paths import ROOT
from bench.harness.server import clean_env, live_server
from config.settings import env_names
from routes.responses.postgres_store import MIGRATIONS, PostgresStore
from routes.responses.store import StoreLimits
from tests.conftest import DEMO_CONTEXT
from tests.leaks import assert_not_leaked
from tests.postgres import PostgresServer

pytestmark = pytest.mark.live


def run_main(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "main_genai.py", *args],
        cwd=ROOT,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_clean_failure(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


@pytest.fixture()
def broken_model(tmp_path: Path, demo_model_dir: Path) -> Path:
    dst = tmp_path / "model"
    shutil.copytree(demo_model_dir, dst)
    return dst


def test_missing_model_dir(tmp_path: Path) -> None:
    proc = run_main(GENAI_MODEL_DIR=str(tmp_path / "absent"))
    assert_clean_failure(proc, "does not exist", "genai_config.json")


@pytest.mark.parametrize(
    ("remove", "needle"),
    [
        ("genai_config.json", "no genai_config.json"),
        ("model.onnx", "missing the model file"),
        ("tokenizer.json", "no tokenizer"),
    ],
)
def test_incomplete_model_dir(broken_model: Path, remove: str, needle: str) -> None:
    (broken_model / remove).unlink()
    assert_clean_failure(run_main(GENAI_MODEL_DIR=str(broken_model)), needle)


def test_onnxruntime_genai_not_installed(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "onnxruntime_genai"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named onnxruntime_genai')\n")
    proc = run_main(PYTHONPATH=str(fake.parent))
    assert_clean_failure(proc, "pip install onnxruntime-genai")


def test_unavailable_cuda_names_the_package() -> None:
    assert_clean_failure(run_main(GENAI_DEVICE="cuda"), "onnxruntime-genai-cuda")


def test_invalid_setting() -> None:
    assert_clean_failure(run_main(PORT="not-a-port"), "Invalid settings", "PORT")
    assert_clean_failure(run_main("--port", "nope"), "Invalid settings", "--port")


def test_a_responses_db_that_cannot_be_opened(tmp_path: Path) -> None:
    proc = run_main(GENAI_RESPONSES_DB=str(tmp_path))  # a folder, not a file
    assert_clean_failure(proc, "Cannot open GENAI_RESPONSES_DB", str(tmp_path))


def test_a_responses_db_laid_out_by_a_newer_server(postgres: PostgresServer) -> None:
    url = postgres.new_database()
    PostgresStore(url, StoreLimits(1, 1, 1.0)).close()
    postgres.sql(url, "UPDATE genai_responses_schema SET version = 9")
    proc = run_main(GENAI_RESPONSES_DB=url)
    known = f"knows versions up to {len(MIGRATIONS)}"
    assert_clean_failure(proc, "schema version 9", known, "a newer server")


# Bad starts that once printed a secret: libpq quoting a malformed URL, a near-miss scheme taken
# as a SQLite path (logged, password and all), pydantic's input_value holding the --api-key.
KEY = "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99"
PASSWORD = "Pw-9f8e7d6c5b4a"
PW_SPLIT = (PASSWORD[:7], PASSWORD[7:])


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {"GENAI_RESPONSES_DB": "postgresql://app:{0}%zz{1}@db.example:5432/genai"},
            "a % not followed by two hex digits",
        ),
        ({"GENAI_RESPONSES_DB": "postgresql://app:{0} {1}@db.example/genai"}, "has a space"),
        ({"GENAI_RESPONSES_DB": "postgresql://app:{0}{1}@[::1:5432/genai"}, "[ has no matching ]"),
        ({"GENAI_RESPONSES_DB": "postgresql+psycopg://app:{0}{1}@db/genai"}, "SQLAlchemy's"),
        ({"GENAI_RESPONSES_DB": "mysql://app:{0}{1}@db/genai"}, "mysql:// is not a database"),
        ({"GENAI_RESPONSES_DB": " postgresql://app:{0}{1}@db/genai"}, "whitespace"),
        # Taken as PostgreSQL (a scheme is read in any case): what fails is the connection.
        (
            {"GENAI_RESPONSES_DB": "PostgreSQL://app:{0}{1}@127.0.0.1:1/genai"},
            "Cannot open GENAI_RESPONSES_DB=postgresql://app@127.0.0.1:1/genai",
        ),
        (
            {"WORKERS": "2", "GENAI_KV_EVENTS_ENDPOINT": "tcp://*:5557"},
            "GENAI_KV_EVENTS_ENDPOINT needs WORKERS=1",
        ),
    ],
)
def test_a_bad_start_is_one_line_without_a_secret(env: dict[str, str], needle: str) -> None:
    env = {name: value.format(*PW_SPLIT) for name, value in env.items()}
    proc = run_main("--api-key", KEY, **env)
    assert_clean_failure(proc, needle)
    output = proc.stdout + proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, output
    assert_not_leaked(output, PASSWORD, KEY)
    first = env.get("GENAI_RESPONSES_DB", "-").strip().split("/")[0]
    assert not (ROOT / first).exists(), "a URL was taken as a SQLite path"


def test_max_length_beyond_context() -> None:
    proc = run_main(GENAI_MAX_LENGTH="100000")
    assert_clean_failure(proc, "GENAI_MAX_LENGTH=100000", str(DEMO_CONTEXT))


def test_help_lists_every_setting_and_starts_nothing() -> None:
    proc = run_main("--help", PORT="1")  # an unusable port: nothing may try to bind it
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: main_genai.py")
    text = " ".join(proc.stdout.split())  # argparse wraps long help lines
    for name in env_names():
        assert f"[{name}; default:" in text, name
    assert "--model-dir" in proc.stdout and "default: 8002" in proc.stdout


def test_unknown_flag_is_a_usage_error() -> None:
    proc = run_main("--devise", "cpu")
    assert proc.returncode == 2 and "unrecognized arguments: --devise" in proc.stderr


def test_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_main(PORT=str(port))
    assert_clean_failure(proc, f"Cannot listen on 127.0.0.1:{port}", "Set PORT")
    assert "loaded" not in proc.stderr, "the model must not load before the bind is known"


def test_unknown_host_is_one_line_and_exit_2() -> None:
    proc = run_main("--host", "no-such-host.invalid")
    assert_clean_failure(proc, "Cannot listen on no-such-host.invalid", "unknown host")


def test_server_starts_with_no_configuration_and_serves_the_native_routes() -> None:
    with live_server() as server:
        base = server.url
        health = httpx.get(f"{base}/healthz").json()
        assert health["status"] == "ok" and health["device"] == "cpu"
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        chat = httpx.post(f"{base}/v1/chat", json=body, timeout=30)
        assert chat.status_code == 200 and chat.json()["metrics"]["output_tokens"] >= 1
        with httpx.stream("POST", f"{base}/v1/chat/stream", json=body, timeout=30) as resp:
            text = "".join(resp.iter_text())
        assert text.rstrip().endswith("}") and '"done":true' in text


def test_flags_override_env_and_misspelled_settings_are_warned_about() -> None:
    with live_server(
        "--model-name",
        "from-flag",
        "--scheduler",
        "engine",
        log_level="info",
        GENAI_MODEL_NAME="from-env",
        GENAI_DEVCE="cuda",
    ) as server:
        [card] = httpx.get(f"{server.url}/v1/models").json()["data"]
        ready = httpx.get(f"{server.url}/readyz").json()
        output = server.output()
    assert card["id"] == "from-flag" and ready["scheduler"] == "engine"
    assert "GENAI_DEVCE is not a setting and is ignored; did you mean GENAI_DEVICE?" in output
