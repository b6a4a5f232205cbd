"""``python main_genai.py export`` with the real onnxruntime-genai builder, on a local
random-weight Hugging Face folder (the weights committed in tests/hub_models/optimum-llama).

Needs the build packages (requirements-build.txt: torch, transformers, onnx, onnx-ir); where
they are not installed, as in the test venv, these tests are skipped and only the command's
unit tests (tests/backends/models/test_export.py, a stand-in builder) run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings import REPO_ROOT
from modelkit.export import missing_build_packages
from tests.conftest import DirectGenerator

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        bool(missing_build_packages()),
        reason=f"the builder needs {', '.join(missing_build_packages())} (requirements-build.txt)",
    ),
]

HF_FOLDER = REPO_ROOT / "tests" / "hub_models" / "optimum-llama"
EXPECTED = json.loads((HF_FOLDER / "expected.json").read_text())


def export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "main_genai.py", "export", str(HF_FOLDER), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_fp32_export_answers_like_hugging_face(tmp_path: Path) -> None:
    out = tmp_path / "fp32"
    proc = export("--out", str(out), "--precision", "fp32")
    assert proc.returncode == 0, proc.stderr
    for n in range(1, 5):
        assert f"[{n}/4] " in proc.stderr
    assert f"python main_genai.py --model-dir {out} --device cpu" in proc.stdout
    assert (out / "genai_config.json").is_file()
    oracle = DirectGenerator(out)
    for case in EXPECTED["completions"]:
        _, tokens = oracle.greedy(case["prompt"], EXPECTED["max_new_tokens"])
        assert tokens == case["generated_ids"]


def test_int4_export_with_options(tmp_path: Path) -> None:
    out = tmp_path / "int4"
    proc = export("--out", str(out), "--accuracy-level", "4", "--block-size", "16")
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / "genai_config.json").read_text())
    assert config["model"]["type"] == "llama"
    _, tokens = DirectGenerator(out).greedy("hello world", 8)
    assert len(tokens) == 8
