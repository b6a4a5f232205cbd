"""What a model folder says about itself, for model listings: its weights' parameter count and
quantization (read off the ONNX graph's initializers, never their data), its size on disk,
when it last changed and a digest of its config."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from backends.models.folder import ModelFolder
from backends.models.onnx_graph import GraphReadError, Initializer, read_initializers

# How the onnxruntime-genai builder names quantized weights (MatMulNBits), and their bits.
_QUANTIZED = {"_Q4": 4, "_Q8": 8}
_NOT_WEIGHTS = ("_scales", "_zero_points", "cos_cache", "sin_cache")
_FLOATS = {"float": "F32", "float16": "F16", "bfloat16": "BF16", "double": "F64"}


@dataclass(frozen=True)
class FolderSummary:
    parameters: int | None  # None: the graph could not be read
    quantization: str  # "Q4", "Q8", "F16", "F32", ... ("unknown" if the graph is unreadable)
    size: int  # bytes of the folder's files
    modified: datetime  # the newest file's modification time, UTC
    digest: str  # sha256 of the folder's config (genai_config.json; config.json for an encoder)


def count_parameters(weights: list[Initializer]) -> tuple[int, str]:
    """(parameters, quantization level): a quantized weight packs 8 / bits parameters into a
    byte; scales, zero points and rotary caches are not parameters."""
    parameters = 0
    bits: set[int] = set()
    floats: dict[str, int] = {}
    for w in weights:
        if w.name.endswith(_NOT_WEIGHTS):
            continue
        kind = next((b for suffix, b in _QUANTIZED.items() if w.name.endswith(suffix)), None)
        if kind is not None:
            bits.add(kind)
            parameters += w.elements * 8 // kind
        else:
            parameters += w.elements
            floats[w.dtype] = floats.get(w.dtype, 0) + w.elements
    if bits:
        return parameters, f"Q{min(bits)}"
    if not floats:
        return parameters, "unknown"
    main = max(floats, key=lambda d: floats[d])
    return parameters, _FLOATS.get(main, main.upper())


@lru_cache(maxsize=64)
def _summarize(path: Path, decoder: str, config_name: str = "genai_config.json") -> FolderSummary:
    files = [f for f in path.rglob("*") if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    newest = max((f.stat().st_mtime for f in files), default=0.0)
    config = path / config_name
    digest = hashlib.sha256(config.read_bytes() if config.is_file() else b"").hexdigest()
    try:
        parameters: int | None
        parameters, quantization = count_parameters(read_initializers(path / decoder))
    except GraphReadError:
        parameters, quantization = None, "unknown"
    modified = datetime.fromtimestamp(newest, UTC)
    return FolderSummary(parameters, quantization, size, modified, digest)


def summarize(folder: ModelFolder) -> FolderSummary:
    """The folder's summary (read once per folder, then kept)."""
    decoder = folder.config.get("model", {}).get("decoder", {}).get("filename", "model.onnx")
    return _summarize(folder.path, str(decoder))


def summarize_encoder(folder: Path, onnx: Path) -> FolderSummary:
    """An encoder folder's summary (its weights in ``onnx``, its config in config.json)."""
    return _summarize(folder, str(onnx.relative_to(folder)), "config.json")


def parameter_size(parameters: int | None) -> str:
    """As Ollama writes it: "135.2M", "7.6B" ("unknown" if not counted)."""
    if parameters is None:
        return "unknown"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if parameters >= scale:
            return f"{parameters / scale:.1f}{unit}"
    return str(parameters)
