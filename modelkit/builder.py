"""The one call of the official onnxruntime-genai builder (``python -m
onnxruntime_genai.models.builder``), offline, in a subprocess: every model the kit builds and
``main_genai.py export`` go through it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from modelkit.offline import offline_env


def draw_biases(model: Any, std: float) -> None:
    """Draw a random-init model's biases like its weights (normal, ``std``), in parameter
    order. transformers initializes biases to zero, and the builder leaves all-zero biases out
    of the export: drawn, the graph keeps every bias Add (Qwen2's q/k/v, Whisper's, the vision
    stages'). A model without biases (Llama) is unchanged."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, std)


class BuilderFailed(Exception):
    """The builder exited with an error; the message is its last error line."""


def builder_command(
    source: Path, out: Path, precision: str, device: str, options: Sequence[str], cache: Path
) -> list[str]:
    """The builder's command line; ``options`` are its ``--extra_options`` (key=value)."""
    return [
        sys.executable, "-m", "onnxruntime_genai.models.builder",
        "-i", str(source), "-o", str(out), "-p", precision, "-e", device, "-c", str(cache),
        "--extra_options", *options,
    ]  # fmt: skip


def run_builder(
    hf_dir: Path,
    out: Path,
    precision: str,
    extra_options: list[str],
    *,
    cache_dir: Path,
    quiet: bool = False,
    device: str = "cpu",
) -> None:
    """The builder on a local HF folder, offline, for ``device``'s execution provider (a CUDA
    build needs onnxruntime-genai-cuda and a GPU); its output shown unless ``quiet``."""
    options = ["hf_token=false", *extra_options]
    cmd = builder_command(hf_dir, out, precision, device, options, cache_dir)
    subprocess.run(cmd, check=True, env=offline_env(), stdout=subprocess.DEVNULL if quiet else None)


_PROGRESS_BAR = re.compile(r"\d+%\||^\d+it \[")
_PER_NODE_LOG = re.compile(r"quantizer \[INFO\]")  # a line per MatMul: shown once


def stream_builder(command: list[str], log: TextIO) -> None:
    """The builder in a subprocess, its output shown indented as it comes (its own progress
    lines; of its progress bars, only the finished ones); raises :class:`BuilderFailed`."""
    with subprocess.Popen(
        command,
        env=offline_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        tail: list[str] = []
        quantizing = False
        for line in proc.stdout:
            line = line.rstrip()
            if not line or line in tail[-1:]:
                continue
            tail = [*tail[-19:], line]
            if _PER_NODE_LOG.search(line):
                if not quantizing:
                    print("      Quantizing the MatMul weights ...", file=log, flush=True)
                quantizing = True
            elif not _PROGRESS_BAR.search(line) or "100%|" in line:
                print(f"      {line}", file=log, flush=True)
        status = proc.wait()
    if status != 0:
        fallback = tail[-1] if tail else "see its output above"
        last = next((t for t in reversed(tail) if "error" in t.lower()), fallback)
        raise BuilderFailed(f"the builder failed (exit status {status}): {last}")
