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
from pathlib import Path

from bench.harness.paths import CACHE, ROOT

# Part of the cache folder's name: bump it whenever the way the models are made changes, so
# that cached folders (and the GGUF and variants derived from them) are rebuilt.
# v2: the tokenizer is padded to the shape's full vocabulary (bench/harness/vocab.py).
MODELS_VERSION = "v2"

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
    accuracy level, "fp32": fp32, "hf": the HF weights}.
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
            [sys.executable, "-m", "bench.harness.vocab", "--shape", shape, "--precision", "int4"]
            + ["--out", str(int4)],
            check=True,
            env=dict(os.environ, KEEP_HF_DIR="1"),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
    check(int4, vocab_size)
    hf = int4 / "hf"
    out = {"int4-all-logits": int4, "hf": hf}
    exported = [o for o in builder_options("int4", "cpu", None, None) if o != "hf_token=false"]
    for name, precision, extra in (
        ("int4", "int4", exported),
        ("int4-acc0", "int4", []),
        ("fp32", "fp32", []),
    ):
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
    "MODELS_VERSION",
    "ensure_models",
    "session_variant",
    "shape_vocab_size",
    "_MODEL_FILES",
]
