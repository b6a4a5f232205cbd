"""Which model in a hub-layout folder to serve: a variant subfolder or an ONNX file.

Microsoft's ONNX repos hold one builder-made folder per variant (``cpu_and_mobile/cpu-int4-rtn-
block-32-acc-level-4``, ``cuda/cuda-fp16``, ``directml/directml-int4-awq-block-128``), each with
its own genai_config.json; community exports (transformers.js layout) hold several ONNX files of
one model at different precisions (``onnx/model.onnx``, ``model_fp16.onnx``, ``model_q4.onnx``,
``model_quantized.onnx``). Either way the choice is a pure decision: the candidates made for the
execution provider in use, the precision that provider runs best first, unless the user pins
one (``GENAI_MODEL_VARIANT``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from backends.errors import StartupError

PIN_SETTING = "GENAI_MODEL_VARIANT"

# Preferred precisions, best first. CPU: int4 (MatMulNBits, int8 compute at accuracy level 4)
# is the fastest and smallest; accelerators: fp16.
CPU_ORDER = ("int4", "int8", "fp32", "int4-bnb", "fp16", "int4-fp16", "bf16")
ACCELERATOR_ORDER = ("fp16", "int4-fp16", "int4", "bf16", "fp32", "int8", "int4-bnb")

# Words in a variant's path that name the execution provider it was made for.
_PATH_PROVIDERS: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu",),
    "mobile": ("cpu",),
    "cuda": ("cuda",),
    "gpu": ("cuda", "directml"),
    "directml": ("directml",),
    "dml": ("directml",),
    "webgpu": ("webgpu",),
    "qnn": ("qnn",),
    "npu": ("qnn",),
    "openvino": ("openvino",),
    "coreml": ("coreml",),
}
# genai_config.json provider_options keys (onnxruntime-genai's names) -> our device names.
_CONFIG_PROVIDERS = {"dml": "directml"}
# transformers.js file suffixes: model_<suffix>.onnx.
_FILE_PRECISIONS = {
    "": "fp32",
    "fp32": "fp32",
    "fp16": "fp16",
    "q4": "int4",
    "int4": "int4",
    "q4f16": "int4-fp16",
    "bnb4": "int4-bnb",
    "quantized": "int8",
    "int8": "int8",
    "uint8": "int8",
    "q8": "int8",
    "bf16": "bf16",
}
_SKIP_DIRS = {".git", ".cache", "__pycache__", ".huggingface"}
MAX_DEPTH = 3


@dataclass(frozen=True)
class Candidate:
    """A variant subfolder or an ONNX file, relative to the folder the user named."""

    rel: str  # posix path: "cuda/cuda-fp16", "onnx/model_q4.onnx"
    providers: frozenset[str]  # device names it is made for; empty: any
    precision: str  # a key of the orders above, or "unknown"
    accuracy_level: int | None = None

    def describe(self) -> str:
        made_for = ", ".join(sorted(self.providers)) or "any provider"
        return f"{self.rel} ({self.precision}, {made_for})"


def _words(rel: str) -> list[str]:
    return [w for w in re.split(r"[/_\-.\s]+", rel.lower()) if w]


def _path_precision(words: list[str]) -> str:
    for word, precision in (
        ("int4", "int4"),
        ("fp16", "fp16"),
        ("bf16", "bf16"),
        ("fp32", "fp32"),
        ("int8", "int8"),
    ):
        if word in words:
            return precision
    return "unknown"


def _config_providers(config_file: Path) -> set[str]:
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
        options = config["model"]["decoder"]["session_options"].get("provider_options", [])
        names = {str(key) for entry in options if isinstance(entry, dict) for key in entry}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()
    return {_CONFIG_PROVIDERS.get(n.lower(), n.lower()) for n in names}


def folder_candidate(root: Path, folder: Path) -> Candidate:
    """A variant subfolder: its provider from its genai_config.json's provider options, else
    from its path's words; CPU when neither says."""
    rel = folder.relative_to(root).as_posix()
    words = _words(rel)
    providers = _config_providers(folder / "genai_config.json")
    if not providers:
        providers = {p for w in words for p in _PATH_PROVIDERS.get(w, ())}
    level = re.search(r"acc-level-(\d+)", rel.lower())
    return Candidate(
        rel,
        frozenset(providers or {"cpu"}),
        _path_precision(words),
        int(level.group(1)) if level else None,
    )


def file_candidate(root: Path, file: Path) -> Candidate:
    """An ONNX file: any provider can run it; its precision from transformers.js naming."""
    rel = file.relative_to(root).as_posix()
    stem = file.stem.lower()
    suffix = stem.split("_", 1)[1] if "_" in stem else ""
    precision = _FILE_PRECISIONS.get(suffix) if stem.startswith("model") else None
    return Candidate(rel, frozenset(), precision or _path_precision(_words(rel)))


def find_variant_folders(root: Path) -> list[Path]:
    """Subfolders (up to three levels down) that hold a genai_config.json."""
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError:
            return
        for child in children:
            if child.name in _SKIP_DIRS or child.name.startswith("."):
                continue
            if (child / "genai_config.json").is_file():
                found.append(child)
            elif depth < MAX_DEPTH:
                walk(child, depth + 1)

    walk(root, 1)
    return found


def find_onnx_files(root: Path) -> list[Path]:
    """The ONNX files of an export without genai_config.json: in the folder or its onnx/."""
    files: list[Path] = []
    for folder in (root, root / "onnx"):
        if folder.is_dir():
            files += sorted(p for p in folder.glob("*.onnx") if p.is_file())
    return files


def _rank(candidate: Candidate, provider: str) -> tuple[int, int, str]:
    order = CPU_ORDER if provider == "cpu" else ACCELERATOR_ORDER
    precision = order.index(candidate.precision) if candidate.precision in order else len(order)
    # On CPU a higher int4 accuracy level computes in int8: faster. Then by name, stably.
    level = -(candidate.accuracy_level or 0) if provider == "cpu" else 0
    return precision, level, candidate.rel


def _matches_pin(candidate: Candidate, pin: str) -> bool:
    pin = pin.strip().strip("/")
    rel = candidate.rel
    names = {rel, rel.removesuffix(".onnx"), rel.rsplit("/", 1)[-1]}
    names.add(rel.rsplit("/", 1)[-1].removesuffix(".onnx"))
    return pin in names


def _listing(candidates: Iterable[Candidate]) -> str:
    return "; ".join(c.describe() for c in candidates)


def choose(
    candidates: list[Candidate], provider: str, pin: str | None, root: Path, kind: str
) -> tuple[Candidate, str]:
    """The candidate to serve and why. A pinned one wins (an unknown pin is an error listing
    the candidates); else the best precision among those made for ``provider``. ``kind``
    names the candidates in messages ("variants", "ONNX files")."""
    if pin:
        matched = [c for c in candidates if _matches_pin(c, pin)]
        if len(matched) == 1:
            return matched[0], f"pinned by {PIN_SETTING}={pin}"
        problem = "matches several" if matched else "matches none"
        raise StartupError(
            f"{PIN_SETTING}={pin} {problem} of the {kind} in {root}: "
            f"{_listing(matched or candidates)}. Name one by its path."
        )
    usable = [c for c in candidates if not c.providers or provider in c.providers]
    if not usable:
        raise StartupError(
            f"{root} holds no variant for the {provider} execution provider; it has: "
            f"{_listing(candidates)}. Pin one with {PIN_SETTING}=<path>, or set GENAI_DEVICE to "
            "a provider it has a variant for."
        )
    best = min(usable, key=lambda c: _rank(c, provider))
    order = CPU_ORDER if provider == "cpu" else ACCELERATOR_ORDER
    if len(usable) == 1:
        why = f"the only one of the {kind} for {provider}"
    else:
        why = f"for {provider}, {best.precision} preferred (order: {', '.join(order)})"
    others = [c for c in candidates if c is not best]
    if others:
        why += f"; also there: {_listing(others)}; pin another with {PIN_SETTING}"
    return best, why
