"""Benchmark model folders, made offline once and cached under bench/.cache/.

The int4 model is built by modelkit/decoder.py (through ``python -m bench.harness.vocab``, which
pads the locally trained tokenizer to the shape's real vocabulary size, 49,152 for SmolLM2, so
the LM head is full size) with the HF weights kept (``KEEP_HF_DIR``), so the other variants
(fp32, int4 at the builder's default accuracy level) and the peers (transformers, llama.cpp,
llama-server) all run on the very same random weights.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.harness.paths import CACHE, ROOT

# Part of the cache folder's name: bump it whenever the way the models are made changes, so
# that cached folders (and the GGUF and variants derived from them) are rebuilt.
# v2: the tokenizer is padded to the shape's full vocabulary (bench/harness/vocab.py).
MODELS_VERSION = "v2"


@dataclass(frozen=True)
class BuildPlan:
    """How the benchmark builds a shape beyond modelkit/decoder.py's defaults.

    ``init_range``: the weights' std (None: decoder.py's 0.2, which the 135M shape has always
    used, so its build stays byte for byte what it was); ``hf_dtype``: how the HF weights are
    saved; ``variants``: the builds besides the base int4 with every position's logits
    (``int4`` is what ``main_genai.py export`` makes; ``int4-acc0`` and ``fp32`` feed the run's
    engine-settings arms)."""

    init_range: float | None = None
    hf_dtype: str = "float32"
    variants: tuple[str, ...] = ("int4", "int4-acc0", "fp32")


# Shapes `python -m bench` builds, by modelkit/shapes.py name. The 1B shape: std 0.02 as a
# trained model's weights (Hugging Face's initializer_range), fp16 on disk (2.1 GB, not 4.3),
# and only the export besides the base build (an fp32 one would be 4.3 GB more).
BUILD_PLANS: dict[str, BuildPlan] = {
    "smollm2-135m": BuildPlan(),
    "qwen2.5-0.5b": BuildPlan(),
    "llama3.2-1b": BuildPlan(init_range=0.02, hf_dtype="float16", variants=("int4",)),
}
BENCH_SHAPES = tuple(BUILD_PLANS)


def build_command(shape: str, out: Path) -> list[str]:
    """``python -m bench.harness.vocab``'s arguments for ``shape``'s base int4 build."""
    plan = BUILD_PLANS.get(shape, BuildPlan())
    cmd = ["-m", "bench.harness.vocab", "--shape", shape, "--precision", "int4"]
    if plan.init_range is not None:
        cmd += ["--init-range", str(plan.init_range)]
    if plan.hf_dtype != "float32":
        cmd += ["--hf-dtype", plan.hf_dtype]
    return cmd + ["--out", str(out)]


# Files a GenAI model folder needs besides genai_config.json (shared by symlink in variants).
_MODEL_FILES = ("model.onnx", "model.onnx.data", "tokenizer.json", "tokenizer_config.json")


def _builder(hf_dir: Path, out: Path, precision: str, extra: list[str]) -> None:
    from modelkit.decoder import run_builder

    cache = out.parent / f".{out.name}-cache"
    run_builder(hf_dir, out, precision, extra, cache_dir=cache, quiet=True)


def ensure_models(shape: str, log: object = print) -> dict[str, Path]:
    """Build (or reuse) the benchmark folders for ``shape``.

    Returns {"int4": int4 with the options ``main_genai.py export`` gives a CPU build (accuracy
    level 4, logits of the last position only), "int4-all-logits": what build_model.py makes
    (accuracy level 4, every position's logits), "int4-acc0": int4 at the builder's default
    accuracy level, "fp32": fp32, "hf": the HF weights}, less the variants the shape's
    :class:`BuildPlan` leaves out.
    """
    from bench.harness.vocab import check
    from modelkit.export import builder_options

    vocab_size = shape_vocab_size(shape)
    base = CACHE / "models" / f"{shape}-{MODELS_VERSION}"
    int4 = base / "int4"
    if not (int4 / "genai_config.json").exists() or not (int4 / "hf").exists():
        log(  # type: ignore[operator]
            f"building {shape} int4 (accuracy level 4, vocabulary {vocab_size}) with "
            "modelkit/decoder.py ..."
        )
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run(
            [sys.executable, *build_command(shape, int4)],
            check=True,
            env=dict(os.environ, KEEP_HF_DIR="1"),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
    check(int4, vocab_size)
    hf = int4 / "hf"
    out = {"int4-all-logits": int4, "hf": hf}
    exported = [o for o in builder_options("int4", "cpu", None, None) if o != "hf_token=false"]
    plan = BUILD_PLANS.get(shape, BuildPlan())
    builds = (("int4", "int4", exported), ("int4-acc0", "int4", []), ("fp32", "fp32", []))
    for name, precision, extra in (b for b in builds if b[0] in plan.variants):
        folder = base / ("int4-export" if name == "int4" else name)
        if not (folder / "genai_config.json").exists():
            log(f"building {shape} {name} from the same weights ...")  # type: ignore[operator]
            shutil.rmtree(folder, ignore_errors=True)
            _builder(hf, folder, precision, extra)
            if not (folder / "chat_template.jinja").exists():
                shutil.copy(int4 / "chat_template.jinja", folder / "chat_template.jinja")
        check(folder, vocab_size)
        out[name] = folder
    return out


def shape_vocab_size(shape: str) -> int:
    """The real vocabulary size of ``shape`` (modelkit/decoder.py's SHAPES)."""
    sys.path.insert(0, str(ROOT))
    try:
        from modelkit.decoder import SHAPES
    finally:
        sys.path.remove(str(ROOT))
    return int(SHAPES[shape]["vocab_size"])


def session_variant(model_dir: Path, name: str, session_options: dict[str, object]) -> Path:
    """A copy of ``model_dir`` whose genai_config.json adds ``session_options``.

    The server only overlays the thread count; other session options (thread spinning) are
    read from the folder, so a variant folder is how the benchmark sets them in the server.
    Large files are symlinked, not copied.
    """
    out = CACHE / "variants" / f"{model_dir.parent.name}-{model_dir.name}-{name}"
    out.mkdir(parents=True, exist_ok=True)
    for f in model_dir.iterdir():
        if f.name in ("genai_config.json", "hf") or f.name.startswith("."):
            continue
        link = out / f.name
        if not link.exists():
            link.symlink_to(f.resolve())
    cfg = json.loads((model_dir / "genai_config.json").read_text())
    cfg["model"]["decoder"].setdefault("session_options", {}).update(session_options)
    (out / "genai_config.json").write_text(json.dumps(cfg, indent=2))
    return out


__all__ = [
    "BENCH_SHAPES",
    "BUILD_PLANS",
    "BuildPlan",
    "MODELS_VERSION",
    "build_command",
    "ensure_models",
    "session_variant",
    "shape_vocab_size",
    "_MODEL_FILES",
]
