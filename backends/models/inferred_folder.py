"""The folder an inferred genai_config.json is served from (:mod:`backends.models.infer_config`):
a cache folder, never the model folder (which may be read-only), with the config, copies of
the tokenizer files, and a link to the folder that holds the ONNX file (so its external
weights resolve as they would next to it). Named by a fingerprint of its inputs, written
atomically, reused while those inputs are unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from backends.models.infer_config import LINK_NAME, TOKENIZER_FILES, CannotInfer, read_json

# Bump when the inferred config changes for the same inputs: old cache entries are not reused.
INFER_VERSION = 1


def default_cache_dir() -> Path:
    """Where inferred configs go: $XDG_CACHE_HOME (or ~/.cache)/onnx-genai-server/configs."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "onnx-genai-server" / "configs"


def _writable_cache(preferred: Path) -> Path:
    for candidate in (preferred, Path(tempfile.gettempdir()) / "onnx-genai-server-configs"):
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            probe = candidate / f".probe-{os.getpid()}"
            probe.touch()
            probe.unlink()
            return candidate
        except OSError:
            continue
    raise CannotInfer(
        f"no writable cache folder for the inferred genai_config.json (tried {preferred} and "
        "the temporary folder); set XDG_CACHE_HOME to a writable folder"
    )


def _fingerprint(hf_dir: Path, model_file: Path, config: dict[str, Any]) -> str:
    parts: list[Any] = [INFER_VERSION, str(hf_dir.resolve()), str(model_file.resolve()), config]
    for path in [model_file, *(hf_dir / name for name in TOKENIZER_FILES)]:
        if path.is_file():
            stat = path.stat()
            parts.append([path.name, stat.st_size, stat.st_mtime_ns])
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def _link(target: Path, link: Path) -> None:
    try:
        link.symlink_to(target.resolve(), target_is_directory=True)
        return
    except OSError:
        pass
    # No symlinks (Windows without the privilege): hard links to each file, same file system.
    link.mkdir()
    try:
        for item in target.iterdir():
            if item.is_file():
                os.link(item, link / item.name)
    except OSError as exc:
        raise CannotInfer(
            f"cannot link {target} into the cache folder ({exc.strerror or exc}); write a "
            "genai_config.json into the model folder instead"
        ) from None


def write_inferred_folder(
    hf_dir: Path, model_file: Path, config: dict[str, Any], cache_dir: Path | None = None
) -> tuple[Path, bool]:
    """A folder onnxruntime-genai can load: the inferred config, the tokenizer files, a link to
    the ONNX file's folder. Returns (folder, whether it was already there). Atomic: several
    processes starting at once end with one complete folder."""
    root = _writable_cache(cache_dir or default_cache_dir())
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", hf_dir.resolve().name)[:60] or "model"
    dest = root / f"{name}-{_fingerprint(hf_dir, model_file, config)}"
    if (dest / "genai_config.json").is_file():
        return dest, True
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        _link(model_file.parent, tmp / LINK_NAME)
        for file in TOKENIZER_FILES:
            if (hf_dir / file).is_file():
                shutil.copyfile(hf_dir / file, tmp / file)
        if not (tmp / "chat_template.jinja").is_file():
            template = read_json(hf_dir / "chat_template.json").get("chat_template")
            if isinstance(template, str):  # processors' older home for the template
                (tmp / "chat_template.jinja").write_text(template, encoding="utf-8")
        (tmp / "genai_config.json").write_text(json.dumps(config, indent=4), encoding="utf-8")
        try:
            tmp.rename(dest)
        except OSError:  # another process finished first
            if not (dest / "genai_config.json").is_file():
                raise
            return dest, True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest, False
