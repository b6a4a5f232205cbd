"""ONNX Runtime model packages (``NAME.ortpackage/``), served without og's own loader.

onnxruntime-genai 0.18 detects a package (a ``manifest.json`` and no ``genai_config.json`` at the
top) but the published wheel is built without onnxruntime's experimental model-package API:
``og.Config(path)``, ``og.Model(path)`` and ``og.Config.from_package_ep`` all answer "Model
package support requires building onnxruntime-genai against ONNX Runtime with the
OrtModelPackageApi experimental functions". So this server does what og would:

- reads the manifest (:mod:`backends.models.package_manifest`);
- picks the variant as onnxruntime's selector does (:mod:`backends.models.package_select`);
- here: resolves ``sha256:<hex>[/tail]`` shared assets (``shared_assets/sha256-<hex>/`` or the
  manifest's ``shared_assets`` overrides) and plain relative paths, confined to the package,
  and lays the chosen variant out as a plain model folder in a cache folder: links to the
  variant's files (never copies of the weights), the shared tokenizer's files beside them, and
  the variant's genai_config.json with its ``sha256:`` references resolved.

Like onnxruntime, the assets' contents are not re-hashed against their names at load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.models.package_manifest import (
    HEX,
    Package,
    Variant,
    confined,
    fail,
    read_json,
    read_package,
    rel,
)
from backends.models.package_select import EpTarget, machine_target, select_variant

log = logging.getLogger("genai.model")

CACHE_VERSION = 1  # bump when the laid-out folder changes for the same package


def resolve_ref(package: Package, variant: Variant, value: str, what: str) -> Path:
    """A path in a variant's genai_config.json as og resolves it in a package: a
    ``sha256:<hex>[/tail]`` shared asset, else a path relative to the variant's folder."""
    root = package.root
    if not value.startswith("sha256:"):
        return confined(root, variant.directory, value, package.portable, what)
    digest, _, tail = value.removeprefix("sha256:").partition("/")
    if not HEX.fullmatch(digest):
        raise fail(
            root,
            f"{what} {value!r} in variant {variant.name!r} is not a sha256:<64 lowercase hex "
            "digits> reference",
        )
    asset = package.assets.get(digest)
    if asset is None:
        raise fail(
            root,
            f"{what} in variant {variant.name!r} names the shared asset sha256:{digest}, which "
            f"the package does not have (no shared_assets/sha256-{digest}/ and no manifest "
            "override)",
        )
    path = confined(root, asset, tail, True, what)  # a tail stays in its asset
    if not path.exists():
        raise fail(
            root, f"{what} {value!r} in variant {variant.name!r}: {rel(root, path)} is missing"
        )
    return path


def _resolve_strings(value: Any, resolve: Callable[[str], Path]) -> Any:
    """``value`` with every ``sha256:`` string replaced by its resolved path (og resolves them
    where it reads paths: session options' initializer and context folders, shared
    initializers' data files)."""
    if isinstance(value, dict):
        return {k: _resolve_strings(v, resolve) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_strings(v, resolve) for v in value]
    if isinstance(value, str) and value.startswith("sha256:"):
        return str(resolve(value).resolve())
    return value


@dataclass(frozen=True)
class LaidOut:
    config: dict[str, Any]  # the genai_config.json to write
    links: dict[str, Path]  # name in the folder -> what it links to


def lay_out(package: Package, variant: Variant) -> LaidOut:
    """What the variant's model folder holds: its config with shared assets resolved, and the
    files to link (the shared tokenizer's first: og reads tokenizer_dir over its own files)."""
    root = package.root
    if not variant.directory.is_dir():
        raise fail(
            root, f"variant {variant.name!r}'s folder {rel(root, variant.directory)} is missing"
        )
    config = read_json(root, variant.directory / "genai_config.json", f"variant {variant.name!r}'s")
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise fail(root, f"variant {variant.name!r}'s genai_config.json has no model section")
    links: dict[str, Path] = {}
    tokenizer_dir = config["model"].pop("tokenizer_dir", None)
    if tokenizer_dir:
        folder = resolve_ref(package, variant, str(tokenizer_dir), "model.tokenizer_dir")
        if not folder.is_dir():
            raise fail(
                root,
                f"model.tokenizer_dir {tokenizer_dir!r} in variant {variant.name!r} is not a "
                "folder",
            )
        links.update({p.name: p for p in sorted(folder.iterdir())})
    for entry in sorted(variant.directory.iterdir()):
        if entry.name != "genai_config.json":
            links.setdefault(entry.name, entry)
    config = _resolve_strings(config, lambda value: resolve_ref(package, variant, value, "a path"))
    decoder = config["model"].get("decoder") or {}
    filename = decoder.get("filename") if isinstance(decoder, dict) else None
    if filename and not (variant.directory / str(filename)).is_file():
        raise fail(
            root,
            f"variant {variant.name!r} is missing its model file {filename} (named by its "
            "genai_config.json)",
        )
    if "tokenizer.json" not in links and "tokenizer.model" not in links:
        raise fail(
            root,
            f"variant {variant.name!r} has no tokenizer (tokenizer.json or tokenizer.model) in "
            "its folder or its model.tokenizer_dir",
        )
    return LaidOut(config, links)


def default_cache_dir() -> Path:
    """Where packages' variants are laid out: $XDG_CACHE_HOME (or ~/.cache)/onnx-genai-server/
    packages."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "onnx-genai-server" / "packages"


def _fingerprint(package: Package, variant: Variant, laid: LaidOut) -> str:
    parts: list[Any] = [CACHE_VERSION, str(package.root.resolve()), variant.name, laid.config]
    for name, target in sorted(laid.links.items()):
        stat = target.stat()
        parts.append([name, str(target.resolve()), stat.st_size, stat.st_mtime_ns])
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def _link(target: Path, link: Path) -> None:
    try:
        link.symlink_to(target.resolve(), target_is_directory=target.is_dir())
    except OSError:
        if target.is_dir():
            raise
        os.link(target, link)  # no symlinks (Windows without the privilege): same file system


def materialize(package: Package, variant: Variant, cache_dir: Path | None = None) -> Path:
    """The variant as a plain model folder in the cache (reused while the package is
    unchanged); written atomically, so processes starting at once end with one folder."""
    laid = lay_out(package, variant)
    base = cache_dir or default_cache_dir()
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", package.root.resolve().name)[:60] or "package"
    last = OSError("no folder tried")
    for root in (base, Path(tempfile.gettempdir()) / "onnx-genai-server-packages"):
        try:
            root.mkdir(parents=True, exist_ok=True)
            dest = root / f"{name}-{variant.name}-{_fingerprint(package, variant, laid)}"
            if (dest / "genai_config.json").is_file():
                return dest
            return _write(root, dest, laid)
        except OSError as exc:
            last = exc
    raise fail(
        package.root,
        f"cannot lay out variant {variant.name!r} in {base} or the temporary folder "
        f"({last.strerror or last}); set XDG_CACHE_HOME to a writable folder",
    )


def _write(root: Path, dest: Path, laid: LaidOut) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        for name, target in laid.links.items():
            _link(target, tmp / name)
        text = json.dumps(laid.config, indent=4)
        (tmp / "genai_config.json").write_text(text, encoding="utf-8")
        try:
            tmp.rename(dest)
        except OSError:  # another process finished first
            if not (dest / "genai_config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def package_folder(
    root: Path,
    provider: str,
    pin: str | None = None,
    cache_dir: Path | None = None,
    target: EpTarget | None = None,
) -> tuple[Path, str]:
    """The model folder to serve from package ``root`` on ``provider``, and how it was
    chosen (for the log and the folder's origin)."""
    package = read_package(root)
    chosen, why = select_variant(package, target or machine_target(provider), pin)
    folder = materialize(package, chosen, cache_dir)
    log.info("model package %s: variant %s (%s), laid out in %s", root, chosen.name, why, folder)
    return folder, f"package variant {chosen.name} ({why})"
