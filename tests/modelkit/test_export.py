"""The export command without the build packages: its options, its errors (missing packages,
an unreachable hub, a bad source), its stages and its closing hint. The builder is replaced by
one that copies the demo model; tests/backends/models/test_export_build.py runs the real one."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
from pathlib import Path
from typing import TextIO

import pytest

import modelkit.export as export
from config.settings import REPO_ROOT
from main_genai import main
from tests.conftest import DEMO_CONTEXT

pytestmark = pytest.mark.unit

HF_FOLDER = REPO_ROOT / "tests" / "hub_models" / "optimum-llama"


@pytest.fixture()
def packages_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "missing_build_packages", lambda: [])


@pytest.fixture()
def fake_builder(
    monkeypatch: pytest.MonkeyPatch, demo_model_dir: Path, packages_present: None
) -> list[list[str]]:
    """Records the builder's command line and writes the demo model where it was told to."""
    calls: list[list[str]] = []

    def builder(command: list[str], log: TextIO) -> None:
        calls.append(command)
        print("Reading decoder layer 0", file=log)
        shutil.copytree(demo_model_dir, command[command.index("-o") + 1], dirs_exist_ok=True)

    monkeypatch.setattr(export, "run_builder", builder)
    monkeypatch.setattr(export, "first_token", lambda folder: 0)
    return calls


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["export", *args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The exit code and stderr of an export the options refuse (argparse's own usage
    errors exit by SystemExit)."""
    try:
        code, _, err = run(capsys, *args)
    except SystemExit as exc:
        code, err = int(exc.code or 0), capsys.readouterr().err
    return code, err


def test_missing_build_packages_say_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "missing_build_packages", lambda: ["torch", "transformers"])
    code, _, err = run(capsys, str(HF_FOLDER), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "[1/4] Checking the build packages" in err
    assert "not installed: torch, transformers" in err
    assert "pip install -r requirements-build.txt" in err
    assert not (tmp_path / "out").exists()


def test_missing_packages_are_found_by_import_name(monkeypatch: pytest.MonkeyPatch) -> None:
    present = {"torch", "onnx", "onnxruntime_genai"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: object() if name in present else None
    )
    assert export.missing_build_packages() == ["transformers", "onnx-ir"]


def test_a_hub_id_offline_is_a_clear_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    packages_present: None,
) -> None:
    # huggingface_hub reads HF_HUB_OFFLINE once, when its constants are first imported:
    # import them before the variable is set, or every later test in this process is offline
    pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    code, _, err = run(capsys, "Qwen/Qwen2.5-0.5B-Instruct", "--out", str(tmp_path / "out"))
    assert code == 2
    assert "[2/4] Fetching Qwen/Qwen2.5-0.5B-Instruct from the Hugging Face Hub" in err
    assert "not in the local Hugging Face cache and HF_HUB_OFFLINE is set" in err
    assert "huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct --local-dir DIR" in err


def test_a_failed_download_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packages_present: None
) -> None:
    class FakeHub:
        @staticmethod
        def snapshot_download(repo_id: str, **kw: object) -> str:
            raise ConnectionError("Failed to resolve the host\nmore")

    monkeypatch.setitem(sys.modules, "huggingface_hub", FakeHub)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(export.ExportError) as exc:
        export.download("owner/model")
    text = str(exc.value)
    assert "cannot download owner/model from the Hugging Face Hub" in text
    assert "ConnectionError: Failed to resolve the host)" in text
    assert "If this machine is offline" in text


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        (lambda p: None, "is not a folder (nor a hub id"),
        (lambda p: p.mkdir(), "has no config.json"),
        (lambda p: (p.mkdir(), (p / "config.json").write_text("{}")), "has no weights"),
    ],
)
def test_a_bad_local_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], packages_present: None, setup, needle
) -> None:
    src = tmp_path / "src"
    setup(src)
    code, _, err = run(capsys, str(src), "--out", str(tmp_path / "out"))
    assert code == 2 and needle in err


def test_a_source_without_tokenizer(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(HF_FOLDER / name, src / name)
    with pytest.raises(export.ExportError, match="has no tokenizer"):
        export.check_local_source(src)


def test_export_stages_command_and_serve_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_builder: list[list[str]]
) -> None:
    out = tmp_path / "out"
    code, stdout, err = run(capsys, str(HF_FOLDER), "--out", str(out))
    assert code == 0, err
    for n, text in enumerate(
        ["Checking the build packages", f"Reading {HF_FOLDER}", "Converting with the "
         "onnxruntime-genai builder (int4, cpu)", f"Checking {out}"], start=1
    ):  # fmt: skip
        assert f"[{n}/4] {text}" in err
    assert "Reading decoder layer 0" in err  # the builder's own progress
    assert "Done in" in err and f"mistral model, context {DEMO_CONTEXT}" in err
    assert f"python main_genai.py --model-dir {out} --device cpu" in stdout
    command = fake_builder[0]
    assert command[1:3] == ["-m", "onnxruntime_genai.models.builder"]
    assert command[command.index("-i") + 1] == str(HF_FOLDER)
    assert command[command.index("-p") + 1] == "int4"
    assert command[command.index("-e") + 1] == "cpu"
    assert command[command.index("--extra_options") + 1 :] == [
        "hf_token=false",
        "accuracy_level=4",
        "prune_lm_head=true",
    ]


@pytest.mark.parametrize(
    ("args", "precision", "device", "options"),
    [
        ([], "int4", "cpu", ["hf_token=false", "accuracy_level=4", "prune_lm_head=true"]),
        (["--device", "cuda"], "fp16", "cuda", ["hf_token=false"]),
        (["--device", "dml"], "int4", "dml", ["hf_token=false"]),
        (["--precision", "fp32"], "fp32", "cpu", ["hf_token=false", "prune_lm_head=true"]),
        (["--all-logits"], "int4", "cpu", ["hf_token=false", "accuracy_level=4"]),
        (
            ["--accuracy-level", "1", "--block-size", "128"],
            "int4",
            "cpu",
            ["hf_token=false", "accuracy_level=1", "block_size=128", "prune_lm_head=true"],
        ),
    ],
)
def test_options_map_to_the_builder(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_builder: list[list[str]],
    args: list[str],
    precision: str,
    device: str,
    options: list[str],
) -> None:
    code, stdout, _ = run(capsys, str(HF_FOLDER), "--out", str(tmp_path / "o"), *args)
    assert code == 0
    command = fake_builder[0]
    assert command[command.index("-p") + 1] == precision
    assert command[command.index("-e") + 1] == device
    assert command[command.index("--extra_options") + 1 :] == options
    serve_device = {"cpu": "cpu", "cuda": "cuda", "dml": "directml"}[device]
    assert f"--device {serve_device}" in stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--precision", "fp16", "--accuracy-level", "4"], "apply to --precision int4 only"),
        (["--block-size", "48"], "invalid choice: 48"),
        (["--accuracy-level", "7"], "invalid choice: 7"),
        (["--device", "tpu"], "invalid choice: 'tpu'"),
    ],
)
def test_bad_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_builder, args, needle
) -> None:
    code, err = refused(capsys, str(HF_FOLDER), "--out", str(tmp_path / "o"), *args)
    assert code == 2 and needle in err
    assert not fake_builder


def test_a_non_empty_output_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_builder: list[list[str]]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run(capsys, str(HF_FOLDER), "--out", str(out))
    assert code == 2 and "not an empty folder (--force" in err and not fake_builder
    code, _, _ = run(capsys, str(HF_FOLDER), "--out", str(out), "--force")
    assert code == 0 and (out / "genai_config.json").is_file()


def test_a_failed_build_names_the_builders_error(tmp_path: Path) -> None:
    script = (
        "import sys; print('Reading layer 0'); print('ValueError: unsupported model'); sys.exit(1)"  # noqa: E501
    )
    with pytest.raises(export.ExportError) as exc:
        export.run_builder([sys.executable, "-c", script], sys.stderr)
    assert "exit status 1" in str(exc.value) and "ValueError: unsupported model" in str(exc.value)


def test_progress_bars_show_only_when_finished(capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        "Saving a: 50%|#####     | 1/2 [00:00<00:00]",
        "Saving b: 100%|##########| 2/2 [00:00<00:00]",
        "x matmul_nbits_quantizer [INFO] - start to quantize /a/MatMul ...",
        "x matmul_nbits_quantizer [INFO] - start to quantize /b/MatMul ...",
        "Saving GenAI config",
    ]
    script = "\n".join(f"print({line!r})" for line in lines)
    export.run_builder([sys.executable, "-c", script], sys.stderr)
    err = capsys.readouterr().err
    assert "50%" not in err and "100%" in err and "      Saving GenAI config" in err
    assert err.count("Quantizing the MatMul weights") == 1 and "/a/MatMul" not in err


def test_a_folder_the_builder_left_broken(
    tmp_path: Path, fake_builder: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(folder: Path) -> int:
        raise RuntimeError("head_size shall be a multiple of 16")

    monkeypatch.setattr(export, "first_token", broken)
    args = argparse.Namespace(
        source=str(HF_FOLDER),
        out=tmp_path / "o",
        precision=None,
        device="cpu",
        accuracy_level=None,
        block_size=None,
        all_logits=False,
        force=False,
    )
    with pytest.raises(export.ExportError, match="cannot run it on the CPU: head_size"):
        export.export(args, log=sys.stderr)
