"""``main_genai.py export --kv-cache int8`` without the build packages: the float build, the
calibration on it and the int8 build, in that order and with the options the builder needs; the
folder marked shared; and the errors. The builder is replaced by one that copies the demo model
(tests/modelkit/test_export.py); tests/backends/engine/batch/test_kv_int8.py serves a real
int8 build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TextIO

import numpy as np
import pytest

import modelkit.export as export
from modelkit.kv_calibration import _widen_empty_pasts
from modelkit.kv_quant import CALIBRATION, SCALES_FILE
from tests.modelkit.test_export import HF_FOLDER, refused, run

pytestmark = pytest.mark.unit


@pytest.fixture()
def steps(monkeypatch: pytest.MonkeyPatch, demo_model_dir: Path) -> list[list[str]]:
    """Records each command; a builder call writes the demo model (marked unshared, as the
    builder marks an int8 CPU model) where it was told to, the calibration its scale file."""
    calls: list[list[str]] = []

    def step(command: list[str], log: TextIO) -> None:
        calls.append(command)
        if command[1] == str(CALIBRATION):
            Path(command[command.index("--out") + 1]).write_text('{"scales": {}}')
            return
        out = Path(command[command.index("-o") + 1])
        shutil.copytree(demo_model_dir, out, dirs_exist_ok=True)
        config = json.loads((out / "genai_config.json").read_text())
        config["search"]["past_present_share_buffer"] = False
        (out / "genai_config.json").write_text(json.dumps(config))

    monkeypatch.setattr(export, "missing_build_packages", lambda: [])
    monkeypatch.setattr(export, "run_builder", step)
    monkeypatch.setattr(export, "first_token", lambda folder: 0)
    return calls


def options(command: list[str]) -> list[str]:
    return command[command.index("--extra_options") + 1 :]


def test_an_int8_export_calibrates_on_a_float_build_then_builds_int8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: list[list[str]]
) -> None:
    out = tmp_path / "out"
    code, _, err = run(capsys, str(HF_FOLDER), "--out", str(out), "--kv-cache", "int8")
    assert code == 0, err
    assert "[3/4] Converting with the onnxruntime-genai builder (int4, cpu, KV cache int8)" in err
    float_build, calibration, int8_build = steps
    float_dir = Path(float_build[float_build.index("-o") + 1])
    assert float_dir != out and int8_build[int8_build.index("-o") + 1] == str(out)
    scales = out / SCALES_FILE
    assert calibration[calibration.index("--model") + 1] == str(float_dir / "model.onnx")
    assert calibration[calibration.index("--tokenizer") + 1] == str(HF_FOLDER)
    assert calibration[calibration.index("--out") + 1] == str(scales)
    assert calibration[calibration.index("--quant-type") + 1] == "int8_per_channel"
    assert "--corpus-file" not in calibration
    assert options(float_build) == ["hf_token=false", "accuracy_level=4", "prune_lm_head=true"]
    assert options(int8_build) == [
        *options(float_build),
        "kv_cache_quant_scheme=int8_per_channel",
        f"kv_cache_scale_file={scales}",
    ]
    assert scales.is_file()  # kept: how the folder's scales were made
    config = json.loads((out / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True


def test_calibration_text_goes_to_the_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: list[list[str]]
) -> None:
    text = tmp_path / "calibration.txt"
    text.write_text("One passage.\n\nAnother passage.\n")
    args = ["--out", str(tmp_path / "out"), "--kv-cache", "int8", "--kv-calibration", str(text)]
    code, _, err = run(capsys, str(HF_FOLDER), *args)
    assert code == 0, err
    calibration = steps[1]
    assert calibration[calibration.index("--corpus-file") + 1] == str(text)


def test_a_float_export_builds_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: list[list[str]]
) -> None:
    code, _, _ = run(capsys, str(HF_FOLDER), "--out", str(tmp_path / "out"))
    assert code == 0 and len(steps) == 1
    assert not any(o.startswith("kv_cache") for o in options(steps[0]))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--kv-cache", "int8", "--device", "cuda"], "--kv-cache int8 applies to --device cpu"),
        (["--kv-calibration", "x.txt"], "--kv-calibration applies to --kv-cache int8 only"),
        (["--kv-cache", "int8", "--kv-calibration", "missing.txt"], "is not a file"),
        (["--kv-cache", "int4"], "invalid choice: 'int4'"),
    ],
)
def test_bad_kv_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: list[list[str]], args, needle
) -> None:
    code, err = refused(capsys, str(HF_FOLDER), "--out", str(tmp_path / "o"), *args)
    assert code == 2 and needle in err
    assert not steps


def test_the_calibration_reads_a_zero_past_as_long_as_the_sequence() -> None:
    # onnxruntime refuses an empty past on a sliding-window layer; the mask still says 0.
    ids = np.zeros((1, 5), np.int64)
    empty = np.zeros((1, 2, 0, 16), np.float16)
    feeds = {"input_ids": ids, "attention_mask": np.ones((1, 5)), "past_key_values.0.key": empty}
    widened = _widen_empty_pasts(feeds)
    past = widened["past_key_values.0.key"]
    assert past.shape == (1, 2, 5, 16) and past.dtype == np.float16 and not past.any()
    assert widened["input_ids"] is ids and feeds["past_key_values.0.key"] is empty
