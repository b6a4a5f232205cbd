"""``python main_genai.py export SOURCE --out DIR``: a Hugging Face model (a local folder or a
hub id) to a GenAI model folder, with the official onnxruntime-genai builder.

The builder and what it needs (torch, transformers, onnx, onnx-ir) are build-time tools, listed
in requirements-build.txt and not installed with the server: when they are missing the command
says what to install. A hub id is downloaded first (huggingface_hub, a transformers
dependency); offline, the command says how to bring the files over instead. Stages print as
they go; at the end the command prints how to serve the result.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from backends.errors import StartupError
from backends.models.folder import inspect_model_folder
from modelkit.builder import BuilderFailed, builder_command, stream_builder
from modelkit.kv_quant import SCALES_FILE, calibration_command, kv_options, share_buffers

BUILD_PACKAGES = {  # import name -> what pip installs it as
    "torch": "torch",
    "transformers": "transformers",
    "onnx": "onnx",
    "onnx_ir": "onnx-ir",
    "onnxruntime_genai": "onnxruntime-genai",
}
PRECISIONS = ("int4", "fp16", "fp32")
DEVICES = ("cpu", "cuda", "dml")
DEFAULT_PRECISION = {"cpu": "int4", "cuda": "fp16", "dml": "int4"}
SERVE_DEVICE = {"cpu": "cpu", "cuda": "cuda", "dml": "directml"}
BLOCK_SIZES = (16, 32, 64, 128, 256)
KV_CACHES = ("float", "int8")
STAGES = 4
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# Files a hub download skips: other formats of the weights, and other exports.
_HUB_IGNORE = ["*.onnx", "*.onnx_data", "*.gguf", "*.h5", "*.msgpack", "*.ot", "onnx/*"]


class ExportError(Exception):
    """A problem the user can act on: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python main_genai.py export",
        description="Export a Hugging Face model to a GenAI model folder with the official "
        "onnxruntime-genai builder (build-time packages: pip install -r requirements-build.txt).",
    )
    ap.add_argument("source", metavar="SOURCE", help="a local Hugging Face folder or a hub id")
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="weights precision (default: int4 for cpu and dml, fp16 for cuda)",
    )
    ap.add_argument("--device", choices=DEVICES, default="cpu", help="execution provider target")
    ap.add_argument(
        "--accuracy-level",
        type=int,
        choices=range(0, 5),
        metavar="{0-4}",
        help="int4 only: MatMulNBits compute precision; 4 = int8 (default 4 on cpu)",
    )
    ap.add_argument(
        "--block-size",
        type=int,
        choices=BLOCK_SIZES,
        help="int4 only: quantization block size (builder default 32)",
    )
    ap.add_argument(
        "--all-logits",
        action="store_true",
        help="keep the logits of every prompt position, which n-gram speculation needs "
        "(GENAI_SPECULATIVE_TOKENS, a request's speculative: off on a model without them); by "
        "default a cpu export computes the last position's only, all generation reads",
    )
    ap.add_argument(
        "--kv-cache",
        choices=KV_CACHES,
        default="float",
        help="cpu only: int8 keeps the KV cache as int8 with a calibrated scale per channel, a "
        "quarter of fp32's memory a token; the export builds twice, a float build to "
        "calibrate on, then the int8 one (default: float, the precision's own type)",
    )
    ap.add_argument(
        "--kv-calibration",
        type=Path,
        metavar="FILE",
        help="--kv-cache int8: calibration text, passages separated by blank lines (or a .json "
        "list of strings); default: the builder's 16 English passages",
    )
    ap.add_argument("--force", action="store_true", help="write into --out even if it is not empty")
    return ap


def builder_options(
    precision: str,
    device: str,
    accuracy_level: int | None,
    block_size: int | None,
    all_logits: bool = False,
) -> list[str]:
    """The builder's ``--extra_options``; int4 options on other precisions are an error."""
    if precision != "int4" and (accuracy_level is not None or block_size is not None):
        raise ExportError("--accuracy-level and --block-size apply to --precision int4 only")
    options = ["hf_token=false"]
    if precision == "int4":
        if accuracy_level is None and device == "cpu":
            accuracy_level = 4  # int8 compute: the fast int4 path on CPU
        if accuracy_level is not None:
            options.append(f"accuracy_level={accuracy_level}")
        if block_size is not None:
            options.append(f"block_size={block_size}")
    if device == "cpu" and not all_logits:
        # The logits head on the last position only: generation reads no other, and on the
        # 135M benchmark shape the head was 11% of a 512-token prefill (docs/models.md).
        options.append("prune_lm_head=true")
    return options


def check_kv_cache(args: argparse.Namespace) -> bool:
    """Whether the export makes an int8 KV cache; its options on a target without it are an
    error (the builder quantizes the KV cache for the CPU and CUDA; the server's batch engine,
    which holds int8 rows, is the CPU's)."""
    int8 = getattr(args, "kv_cache", "float") == "int8"
    if int8 and args.device != "cpu":
        raise ExportError("--kv-cache int8 applies to --device cpu only")
    if getattr(args, "kv_calibration", None) is not None:
        if not int8:
            raise ExportError("--kv-calibration applies to --kv-cache int8 only")
        if not args.kv_calibration.is_file():
            raise ExportError(f"{args.kv_calibration} (--kv-calibration) is not a file")
    return int8


def missing_build_packages() -> list[str]:
    return [pip for name, pip in BUILD_PACKAGES.items() if importlib.util.find_spec(name) is None]


def looks_like_hub_id(source: str) -> bool:
    return bool(_HUB_ID.match(source)) and not Path(source).exists()


def check_local_source(path: Path) -> None:
    if not path.is_dir():
        raise ExportError(f"{path} is not a folder (nor a hub id like owner/name)")
    if not (path / "config.json").is_file():
        raise ExportError(f"{path} has no config.json: not a Hugging Face model folder")
    weights = [*path.glob("*.safetensors"), *path.glob("*.bin"), *path.glob("*.gguf")]
    if not weights:
        raise ExportError(f"{path} has no weights (*.safetensors, *.bin or *.gguf)")
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer.model").is_file():
        raise ExportError(
            f"{path} has no tokenizer (tokenizer.json or tokenizer.model): the builder copies "
            "it into the GenAI folder, and the server needs it"
        )


def download(hub_id: str) -> Path:
    """The hub model's files: from the local Hugging Face cache, else downloaded."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(hub_id, local_files_only=True, ignore_patterns=_HUB_IGNORE))
    except Exception:  # not in the cache: download it (below)
        pass
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    hint = (
        f"download it where the hub is reachable (huggingface-cli download {hub_id} "
        "--local-dir DIR), copy DIR here and pass it as SOURCE"
    )
    if offline:
        raise ExportError(
            f"{hub_id} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: {hint}"
        )
    try:
        return Path(snapshot_download(hub_id, ignore_patterns=_HUB_IGNORE, etag_timeout=10))
    except Exception as exc:  # huggingface_hub raises many kinds: all mean "not here"
        raise ExportError(
            f"cannot download {hub_id} from the Hugging Face Hub ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no details'}). If this machine is "
            f"offline, {hint}"
        ) from None


def run_builder(command: list[str], log: TextIO) -> None:
    """The kit's builder call, its output shown on ``log`` as it comes."""
    try:
        stream_builder(command, log)
    except BuilderFailed as exc:
        raise ExportError(str(exc)) from None


def export(
    args: argparse.Namespace,
    log: TextIO | None = None,
    builder: Callable[[list[str], TextIO], None] | None = None,
) -> Path:
    """Run the stages (shown on ``log``, default stderr); raise :class:`ExportError` with what
    to do when one cannot go on."""
    log = log or sys.stderr
    started = time.perf_counter()

    def stage(n: int, text: str) -> None:
        print(f"[{n}/{STAGES}] {text}", file=log, flush=True)

    precision = args.precision or DEFAULT_PRECISION[args.device]
    options = builder_options(
        precision, args.device, args.accuracy_level, args.block_size, args.all_logits
    )
    int8_kv = check_kv_cache(args)
    out: Path = args.out
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not args.force)):
        raise ExportError(f"{out} exists and is not an empty folder (--force writes into it)")

    stage(1, "Checking the build packages")
    missing = missing_build_packages()
    if missing:
        raise ExportError(
            f"the export needs build-time packages that are not installed: {', '.join(missing)}. "
            "Install them with: pip install -r requirements-build.txt (they are not needed "
            "to serve the result)"
        )

    if looks_like_hub_id(args.source):
        stage(2, f"Fetching {args.source} from the Hugging Face Hub")
        source = download(args.source)
    else:
        stage(2, f"Reading {args.source}")
        source = Path(args.source)
    check_local_source(source)

    kv = ", KV cache int8" if int8_kv else ""
    stage(3, f"Converting with the onnxruntime-genai builder ({precision}, {args.device}{kv})")
    out.mkdir(parents=True, exist_ok=True)
    build = builder or run_builder
    with tempfile.TemporaryDirectory(prefix="genai-export-") as tmp:
        cache = Path(tmp) / "cache"
        if int8_kv:
            float_kv = Path(tmp) / "float-kv"
            print("      The float-KV build, to calibrate the int8 scales on:", file=log)
            build(builder_command(source, float_kv, precision, args.device, options, cache), log)
            print("      Calibrating the KV cache scales:", file=log, flush=True)
            scales = out / SCALES_FILE
            build(calibration_command(float_kv, source, scales, args.kv_calibration), log)
            options = [*options, *kv_options(scales)]
            print("      The int8-KV build:", file=log, flush=True)
        build(builder_command(source, out, precision, args.device, options, cache), log)
    if int8_kv:
        share_buffers(out)

    stage(4, f"Checking {out}")
    try:
        folder = inspect_model_folder(out)
    except StartupError as exc:
        raise ExportError(f"the builder's output is not a usable model folder: {exc}") from None
    if args.device == "cpu":  # other targets cannot be tried on every machine
        try:
            first_token(out)
        except Exception as exc:  # onnxruntime-genai reports through RuntimeError/OSError
            raise ExportError(
                f"exported to {out}, but onnxruntime-genai cannot run it on the CPU: {exc}"
            ) from None
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(
        f"Done in {time.perf_counter() - started:.0f} s: {folder.model_type} model, "
        f"context {folder.context_length}, {size / 2**20:.1f} MiB in {out}",
        file=log,
        flush=True,
    )
    return out


def first_token(folder: Path) -> int:
    """Load the folder and generate one token: what serving it will do first."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    ids = tokenizer.encode("Hello")
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + 1, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(ids)
    generator.generate_next_token()
    return int(generator.get_next_tokens()[0])


def serve_hint(out: Path, device: str) -> str:
    return (
        "Serve it with:\n"
        f"  python main_genai.py --model-dir {out} --device {SERVE_DEVICE[device]}\n"
        f"or: GENAI_MODEL_DIR={out} GENAI_DEVICE={SERVE_DEVICE[device]} bash scripts/serve.sh"
    )


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    try:
        out = export(args)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; the output folder may be incomplete", file=sys.stderr)
        return 130
    print(serve_hint(out, args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
