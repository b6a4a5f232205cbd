"""An int8 KV cache: the calibration the builder needs, and the options that ask for it.

onnxruntime-genai's builder writes a decoder whose KV cache inputs and outputs are int8
(``kv_cache_quant_scheme=int8_per_channel``): each layer's ``GroupQueryAttention`` quantizes
the new keys and values as it writes them and dequantizes the past as it reads it, with one
scale per layer and channel stored in the graph (initializers ``model.layers.N.attn.k_scale``
and ``v_scale``). The scales come from a calibration run: the same model built with a float
KV cache, run over calibration text, its keys' and values' 99.99th percentile per channel
(onnxruntime-genai's ``kv_cache_calibration``, through modelkit/kv_calibration.py; keys on
the pair norm, so that the scales hold at positions the text never reached). So an int8 build
is two builds with a calibration between them.

The builder marks a CPU model with a quantized KV cache ``past_present_share_buffer: false``,
so og.Generator starts it on an empty past, which onnxruntime refuses on a sliding-window
layer ("KV cache capacity (0) must be at least local_window_size"). Its CPU attention op
shares past and present whenever they are one buffer, int8 included, so the folder is marked
shared (:func:`share_buffers`): og.Generator then allocates the whole cache once, as it does
for a float model, and its greedy tokens equal the batch engine's (tests/models/*-kv8).

The calibration text is the builder's own (16 English passages on general subjects) unless a
file is given: passages separated by blank lines, or a ``.json`` list of strings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from modelkit.offline import offline_env

SCHEME = "int8_per_channel"  # a scale per channel: what the CPU kernels take, closest to fp32
# onnxruntime-genai's calibration, able to run sliding-window models (run by path: it needs
# only onnxruntime, numpy and the builder's packages, wherever the command runs from)
CALIBRATION = Path(__file__).with_name("kv_calibration.py")
SCALES_FILE = "kv_cache_scales.json"  # kept in the model folder: how its scales were made


def calibration_command(
    baseline: Path, tokenizer: Path, scales: Path, corpus: Path | None = None
) -> list[str]:
    """The calibration's command line: ``baseline`` is the float-KV build's folder,
    ``tokenizer`` the Hugging Face folder with its tokenizer."""
    command = [
        sys.executable, str(CALIBRATION), "--model", str(baseline / "model.onnx"),
        "--tokenizer", str(tokenizer), "--out", str(scales), "--quant-type", SCHEME,
    ]  # fmt: skip
    if corpus is not None:
        command += ["--corpus-file", str(corpus)]
    return command


def kv_options(scales: Path) -> list[str]:
    """The builder's ``--extra_options`` for an int8 KV cache with these scales."""
    return [f"kv_cache_quant_scheme={SCHEME}", f"kv_cache_scale_file={scales}"]


def calibrate(
    baseline: Path, tokenizer: Path, scales: Path, corpus: Path | None = None, quiet: bool = False
) -> None:
    """Write ``scales`` from the float-KV build in ``baseline``, offline."""
    subprocess.run(
        calibration_command(baseline, tokenizer, scales, corpus),
        check=True,
        env=offline_env(),
        stderr=subprocess.DEVNULL if quiet else None,  # its progress; an error is raised
    )


def share_buffers(folder: Path) -> None:
    """Mark ``folder``'s genai_config.json ``past_present_share_buffer: true``."""
    path = folder / "genai_config.json"
    config = json.loads(path.read_text())
    config["search"]["past_present_share_buffer"] = True
    path.write_text(json.dumps(config, indent=4) + "\n")
