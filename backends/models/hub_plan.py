"""Which files of a Hugging Face hub repo to fetch, and which folder of it to serve, with the
same logic that picks a variant in a hub-layout folder on disk (:mod:`backends.models.variants`):
the variant folders' ``genai_config.json`` files (fetched first, :data:`CONFIG_PATTERNS`) say
which execution provider each was made for.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from backends.errors import StartupError
from backends.models.variants import (
    MAX_DEPTH,
    PIN_SETTING,
    choose,
    file_candidate,
    folder_candidate,
)

log = logging.getLogger("genai.hub")

CONFIG_PATTERNS = ("genai_config.json", "*/genai_config.json")


@dataclass(frozen=True)
class Plan:
    """What to fetch of a repo and what to serve of it."""

    patterns: tuple[str, ...]  # snapshot_download's allow_patterns
    serve: str  # the folder to serve, relative to the snapshot ("" for its top)
    variant: str | None  # the ONNX file to pin in an export without genai_config.json
    why: str


def plan_files(root: Path, files: Iterable[str], provider: str, pin: str | None, name: str) -> Plan:
    """The files of the repo whose listing is ``files`` to fetch for ``provider``: a GenAI
    folder whole; in a repo of variant folders, the one :func:`variants.choose` picks (their
    ``genai_config.json`` files must already be under ``root``); in an ONNX export without
    one, the chosen ONNX file (and its external data) with the Hugging Face files, none of the
    other ONNX files."""
    listing = sorted(set(files))
    if "genai_config.json" in listing:
        if pin:
            log.warning("%s=%s ignored: %s has a genai_config.json", PIN_SETTING, pin, name)
        return Plan(("*",), "", None, "a GenAI model folder")
    folders = [
        PurePosixPath(f).parent.as_posix()
        for f in listing
        if PurePosixPath(f).name == "genai_config.json"
        and len(PurePosixPath(f).parts) <= MAX_DEPTH + 1
    ]
    if folders:
        candidates = [folder_candidate(root, root / f) for f in folders]
        chosen, why = choose(candidates, provider, pin, Path(name), "variants")
        return Plan((f"{chosen.rel}/*",), chosen.rel, None, f"variant {chosen.rel} ({why})")
    onnx = [
        f
        for f in listing
        if f.endswith(".onnx") and PurePosixPath(f).parent.as_posix() in (".", "onnx")
    ]
    if onnx:
        candidates = [file_candidate(root, root / f) for f in onnx]
        best, why = choose(candidates, provider, pin, Path(name), "ONNX files")
        others = [c.rel for c in candidates if c is not best]
        wanted = [f for f in listing if f.startswith(best.rel) or not _of_any(f, others)]
        return Plan(tuple(wanted), "", best.rel, f"{best.rel} ({why})")
    shown = ", ".join(listing[:8]) + (", ..." if len(listing) > 8 else "")
    raise StartupError(
        f"{name} holds no genai_config.json, no variant folder with one and no ONNX model "
        f"(*.onnx or onnx/*.onnx); its files: {shown or 'none'}."
    )


def _of_any(file: str, models: Sequence[str]) -> bool:
    """Whether ``file`` is one of ``models`` or its external data (model.onnx_data, .data)."""
    return any(file.startswith(m) for m in models)
