"""ONNX Runtime model packages (``NAME.ortpackage/``) built at test time from a test model's
folder, in the layout onnxruntime-genai's docs/model_package.md shows: a manifest with one
inline component, ``model``, one folder per variant (its genai_config.json and links to the
model's ONNX files: nothing large is copied), and the tokenizer files once, as a shared asset
named by onnxruntime's directory hash and referenced as ``model.tokenizer_dir: sha256:<hex>``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

# variant name -> its manifest entry
CPU_AND_CUDA: dict[str, dict[str, str]] = {
    "cpu": {"ep": "CPUExecutionProvider", "device": "cpu"},
    "cuda": {"ep": "CUDAExecutionProvider", "device": "gpu"},
}
CUDA_ONLY = {"cuda": CPU_AND_CUDA["cuda"]}


def directory_hash(folder: Path) -> str:
    """onnxruntime's shared-asset digest (model_package's ComputeDirectoryHash): the sha256 of
    the lines ``<file sha256>  <relative path>`` sorted by path."""
    lines = sorted(
        (p.relative_to(folder).as_posix(), hashlib.sha256(p.read_bytes()).hexdigest())
        for p in folder.rglob("*")
        if p.is_file()
    )
    text = "".join(f"{digest}  {rel}\n" for rel, digest in lines)
    return hashlib.sha256(text.encode()).hexdigest()


def _variant_config(source: Path, provider: str, tokenizer_dir: str | None) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((source / "genai_config.json").read_text())
    if tokenizer_dir is not None:
        config["model"]["tokenizer_dir"] = tokenizer_dir
    if provider == "cuda":  # as the builder writes a CUDA variant
        options = config["model"]["decoder"].setdefault("session_options", {})
        options["provider_options"] = [{"cuda": {}}]
    return config


def build_package(
    dest: Path,
    source: Path,
    variants: Mapping[str, Mapping[str, str]] = CPU_AND_CUDA,
    *,
    shared_tokenizer: bool = True,
) -> Path:
    """``dest`` (``NAME.ortpackage``) holding ``source``'s model once per variant. The
    variant's provider is the first word of its name (``cpu``, ``cuda``)."""
    dest.mkdir(parents=True)
    tokenizer_dir = None
    if shared_tokenizer:
        staging = dest / "shared_assets" / "staging"
        staging.mkdir(parents=True)
        for name in TOKENIZER_FILES:
            if (source / name).is_file():
                shutil.copyfile(source / name, staging / name)
        digest = directory_hash(staging)
        staging.rename(staging.with_name(f"sha256-{digest}"))
        tokenizer_dir = f"sha256:{digest}"
    for name, entry in variants.items():
        folder = dest / entry.get("variant_directory", name)
        folder.mkdir(parents=True)
        config = _variant_config(source, name.split("-")[0], tokenizer_dir)
        (folder / "genai_config.json").write_text(json.dumps(config, indent=4))
        for file in source.iterdir():
            shared = shared_tokenizer and file.name in TOKENIZER_FILES
            if file.is_file() and file.name != "genai_config.json" and not shared:
                (folder / file.name).symlink_to(file.resolve())
    manifest = {
        "schema_version": "1.0",
        "package_name": source.name,
        "components": {"model": {"variants": {k: dict(v) for k, v in variants.items()}}},
    }
    write_manifest(dest, manifest)
    return dest


def write_manifest(package: Path, manifest: Mapping[str, Any]) -> None:
    (package / "manifest.json").write_text(json.dumps(manifest, indent=2))


def read_manifest(package: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((package / "manifest.json").read_text())
    return value


def edit_variant_config(package: Path, variant: str, **model: Any) -> None:
    """Set fields of a variant's genai_config.json ``model`` section."""
    path = package / variant / "genai_config.json"
    config = json.loads(path.read_text())
    config["model"].update(model)
    path.write_text(json.dumps(config, indent=4))
