"""main_genai.py as a subprocess: clear start-up errors with a non-zero exit, and a real start."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.live_server import ROOT, live_server, server_env


def run_main(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "main_genai.py"],
        cwd=ROOT,
        env=server_env(**env),
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
    proc = run_main(tmp_path, GENAI_MODEL_DIR=str(tmp_path / "absent"))
    assert_clean_failure(proc, "does not exist", "genai_config.json")


@pytest.mark.parametrize(
    ("remove", "needle"),
    [
        ("genai_config.json", "no genai_config.json"),
        ("model.onnx", "missing the model file"),
        ("tokenizer.json", "no tokenizer"),
    ],
)
def test_incomplete_model_dir(tmp_path: Path, broken_model: Path, remove: str, needle: str) -> None:
    (broken_model / remove).unlink()
    assert_clean_failure(run_main(tmp_path, GENAI_MODEL_DIR=str(broken_model)), needle)


def test_onnxruntime_genai_not_installed(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "onnxruntime_genai"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named onnxruntime_genai')\n")
    proc = run_main(tmp_path, PYTHONPATH=str(fake.parent))
    assert_clean_failure(proc, "pip install onnxruntime-genai")


def test_unavailable_cuda_names_the_package(tmp_path: Path) -> None:
    proc = run_main(tmp_path, GENAI_DEVICE="cuda")
    assert_clean_failure(proc, "onnxruntime-genai-cuda")


def test_invalid_setting(tmp_path: Path) -> None:
    assert_clean_failure(run_main(tmp_path, PORT="not-a-port"), "Invalid settings", "PORT")


def test_max_length_beyond_context(tmp_path: Path) -> None:
    proc = run_main(tmp_path, GENAI_MAX_LENGTH="100000")
    assert_clean_failure(proc, "GENAI_MAX_LENGTH=100000", "2048")


def test_server_starts_with_no_configuration_and_serves_all_seed_routes() -> None:
    with live_server() as base:
        health = httpx.get(f"{base}/healthz").json()
        assert health["status"] == "ok" and health["device"] == "cpu"
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        chat = httpx.post(f"{base}/v1/chat", json=body, timeout=30)
        assert chat.status_code == 200 and chat.json()["metrics"]["output_tokens"] >= 1
        with httpx.stream("POST", f"{base}/v1/chat/stream", json=body, timeout=30) as resp:
            text = "".join(resp.iter_text())
        assert text.rstrip().endswith("}") and '"done": true' in text
