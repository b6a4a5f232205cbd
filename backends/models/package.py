"""ONNX Runtime model packages (``NAME.ortpackage/``), served without og's own loader.

onnxruntime-genai 0.18 detects a package (a ``manifest.json`` and no ``genai_config.json`` at the
top) but the published wheel is built without onnxruntime's experimental model-package API:
``og.Config(path)``, ``og.Model(path)`` and ``og.Config.from_package_ep`` all answer "Model
package support requires building onnxruntime-genai against ONNX Runtime with the
OrtModelPackageApi experimental functions". So this module does what og would:

- reads the manifest (schema major 1; exactly one component, inline or ``component.json``;
  variants with ``ep``, ``device``, ``compatibility_string``, ``variant_directory``);
- picks the variant as onnxruntime's selector does: for the execution provider in use, a
  variant's ``ep`` must be that provider's onnxruntime name and its ``device`` one of the
  provider's hardware kinds; its compatibility string is scored by the provider itself
  (optimal 100, prefer recompilation 50, not applicable 0, unsupported: out), plus 10 for
  naming the provider; a variant with no ``ep``, ``device`` or string fits any provider at 0;
  the highest score wins, declaration order breaks ties;
- resolves ``sha256:<hex>[/tail]`` shared assets (``shared_assets/sha256-<hex>/`` or the
  manifest's ``shared_assets`` overrides) and plain relative paths, confined to the package;
- lays the chosen variant out as a plain model folder in a cache folder: links to the variant's
  files (never copies of the weights), the shared tokenizer's files beside them, and the
  variant's genai_config.json with its ``sha256:`` references resolved.

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
from pathlib import Path, PurePosixPath
from typing import Any

from backends.errors import StartupError

log = logging.getLogger("genai.model")

MANIFEST = "manifest.json"
SCHEMA_MAJOR = 1  # the manifest majors onnxruntime 1.31 reads
SCHEMA_MINOR = 0  # the newest minor known here: a newer one may carry fields we skip
CACHE_VERSION = 1  # bump when the laid-out folder changes for the same package

# Our device names -> onnxruntime's execution provider names (what a variant's "ep" says).
EP_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "directml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "qnn": "QNNExecutionProvider",
}

# What an execution provider says of a compatibility string, and the score onnxruntime gives it
# (None: the variant is out).
SCORES: dict[str, int | None] = {
    "optimal": 100,
    "prefer_recompilation": 50,
    "not_applicable": 0,
    "unsupported": None,
}
NAMED_EP_BONUS = 10

_MANIFEST_KEYS = {
    "schema_version",
    "package_name",
    "package_version",
    "description",
    "layout",
    "components",
    "shared_assets",
    "additional_metadata",
}
_COMPONENT_KEYS = {"component_name", "variants", "additional_metadata"}
_VARIANT_KEYS = {
    "variant_directory",
    "ep",
    "device",
    "compatibility_string",
    "executor_info",
    "additional_metadata",
}
_HEX = re.compile(r"[0-9a-f]{64}")
_ASSET_DIR = re.compile(r"sha256-([0-9a-f]{64})")


def is_model_package(path: Path) -> bool:
    """og's test: a folder with a top-level manifest.json and no top-level genai_config.json
    (a plain model folder that happens to carry a manifest.json stays a plain folder)."""
    return (
        path.is_dir() and (path / MANIFEST).is_file() and not (path / "genai_config.json").exists()
    )


@dataclass(frozen=True)
class Variant:
    name: str
    directory: Path
    ep: str | None = None
    device: str | None = None
    compatibility: str | None = None

    @property
    def unconstrained(self) -> bool:
        return not self.ep and not self.device and not self.compatibility

    def describe(self) -> str:
        what = [self.ep or "any provider"]
        if self.device:
            what.append(self.device)
        if self.compatibility:
            what.append(f"compatibility {self.compatibility!r}")
        return f"{self.name} ({', '.join(what)})"


@dataclass(frozen=True)
class Package:
    root: Path
    component: str
    variants: tuple[Variant, ...]
    assets: dict[str, Path]  # sha256 hex -> the asset's folder
    portable: bool = True

    def listing(self) -> str:
        return "; ".join(v.describe() for v in self.variants) or "no variants"


@dataclass(frozen=True)
class EpTarget:
    """The execution provider a variant is chosen for: its onnxruntime name, the kinds of
    hardware it has here (``cpu``, ``gpu``, ``npu``; empty: not known, any fits), and how it
    judges a compatibility string for some of those kinds (one of :data:`SCORES`' keys)."""

    provider: str  # our name (GENAI_DEVICE): cpu, cuda, ...
    ep_name: str
    devices: tuple[str, ...] = ()
    judge: Callable[[str, tuple[str, ...]], str] = lambda _string, _devices: "not_applicable"


def _fail(root: Path, why: str) -> StartupError:
    return StartupError(f"Model package {root}: {why}")


def _read_json(root: Path, file: Path, what: str) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _fail(root, f"{what} {_rel(root, file)} is missing") from None
    except OSError as exc:
        raise _fail(root, f"cannot read {what} {_rel(root, file)} ({exc.strerror})") from None
    except ValueError as exc:
        raise _fail(root, f"{what} {_rel(root, file)} is not valid JSON ({exc})") from None


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _confined(root: Path, base: Path, value: str, portable: bool, what: str) -> Path:
    """``value`` (a relative POSIX path) under ``base``; in a portable package no absolute
    path and no ``..``, and the result stays in the package once links are followed."""
    pure = PurePosixPath(value)
    if portable and (pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", value)):
        raise _fail(
            root,
            f"{what} {value!r} leaves the package (a portable package names paths inside it, "
            "without '..' or a leading '/')",
        )
    path = base / Path(*pure.parts) if pure.parts else base
    if portable and not path.resolve().is_relative_to(root.resolve()):
        raise _fail(root, f"{what} {value!r} leads outside the package")
    return path


def _unknown(root: Path, body: dict[str, Any], known: set[str], where: str) -> None:
    extra = sorted(set(body) - known)
    if extra:
        raise _fail(root, f"{where} has unknown field {extra[0]!r}")


def _schema(root: Path, value: Any) -> tuple[int, int]:
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    match = re.fullmatch(r"(\d+)(?:\.(\d+))?", text)
    if not match:
        raise _fail(root, f"manifest.json's schema_version {value!r} is not '<major>.<minor>'")
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    if major != SCHEMA_MAJOR:
        raise _fail(
            root, f"manifest.json's schema_version {text} is not one this server reads (1.x)"
        )
    return major, minor


def read_package(root: Path) -> Package:
    """The package's one component, its variants in declaration order and its shared assets;
    a :class:`StartupError` naming what is wrong."""
    manifest = _read_json(root, root / MANIFEST, "its manifest")
    if not isinstance(manifest, dict):
        raise _fail(root, "manifest.json is not a JSON object")
    if "schema_version" not in manifest:
        raise _fail(root, "manifest.json has no schema_version")
    _, minor = _schema(root, manifest["schema_version"])
    strict = minor <= SCHEMA_MINOR  # a newer minor may add optional fields: read past them
    if strict:
        _unknown(root, manifest, _MANIFEST_KEYS, "manifest.json")
    layout = manifest.get("layout", "portable")
    if layout not in ("portable", "installed"):
        raise _fail(root, f"manifest.json's layout {layout!r} is neither portable nor installed")
    portable = layout == "portable"
    components = manifest.get("components")
    if not isinstance(components, dict) or not components:
        raise _fail(root, "manifest.json declares no components")
    if len(components) != 1:
        names = ", ".join(sorted(components))
        raise _fail(
            root,
            f"it declares {len(components)} components ({names}); onnxruntime-genai serves a "
            "package of exactly one",
        )
    ((component, body),) = components.items()
    component_dir = root
    if isinstance(body, str):  # an external component: a folder with component.json, or a file
        path = _confined(root, root, body, portable, f"component {component!r}")
        if path.is_dir():
            path = path / "component.json"
        body = _read_json(root, path, f"component {component!r}'s file")
        component_dir = path.parent
    if not isinstance(body, dict):
        raise _fail(root, f"component {component!r} is not a JSON object")
    if strict:
        _unknown(root, body, _COMPONENT_KEYS, f"component {component!r}")
    variants = body.get("variants")
    if not isinstance(variants, dict):
        raise _fail(root, f"component {component!r} has no 'variants' object")
    parsed = tuple(
        _variant(root, component_dir, name, value, portable, strict)
        for name, value in variants.items()
    )
    return Package(root, component, parsed, _assets(root, manifest, portable), portable)


def _variant(
    root: Path, component_dir: Path, name: str, body: Any, portable: bool, strict: bool
) -> Variant:
    where = f"variant {name!r}"
    if not isinstance(body, dict):
        raise _fail(root, f"{where} is not a JSON object")
    if strict:
        _unknown(root, body, _VARIANT_KEYS, where)
    fields: dict[str, str | None] = {}
    for key in ("variant_directory", "ep", "device", "compatibility_string"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise _fail(root, f"{where}'s {key} is not a string")
        fields[key] = value or None
    directory = _confined(root, component_dir, fields["variant_directory"] or name, portable, where)
    device = fields["device"].lower() if fields["device"] else None
    return Variant(name, directory, fields["ep"], device, fields["compatibility_string"])


def _assets(root: Path, manifest: dict[str, Any], portable: bool) -> dict[str, Path]:
    """sha256 hex -> folder: the manifest's overrides first, then shared_assets/sha256-<hex>/."""
    found: dict[str, Path] = {}
    overrides = manifest.get("shared_assets", {})
    if not isinstance(overrides, dict):
        raise _fail(root, "manifest.json's shared_assets is not an object")
    for uri, value in overrides.items():
        digest = str(uri).removeprefix("sha256:")
        if not str(uri).startswith("sha256:") or not _HEX.fullmatch(digest):
            raise _fail(root, f"shared_assets key {uri!r} is not a sha256:<64 hex digits> URI")
        if not isinstance(value, str):
            raise _fail(root, f"shared_assets[{uri!r}] is not a path")
        found[digest] = _confined(root, root, value, portable, f"shared asset {uri!r}")
    shared = root / "shared_assets"
    if shared.is_dir():
        for child in sorted(shared.iterdir()):
            match = _ASSET_DIR.fullmatch(child.name)
            if match and child.is_dir():
                found.setdefault(match.group(1), child)
    return found


def _score(variant: Variant, target: EpTarget) -> int | None:
    """onnxruntime's score of ``variant`` for ``target``; None: it does not run there."""
    if variant.unconstrained:
        return 0
    if variant.ep and variant.ep != target.ep_name:
        return None
    devices = target.devices
    if variant.device and devices:
        if variant.device not in devices:
            return None
        devices = (variant.device,)
    verdict = (
        target.judge(variant.compatibility, devices) if variant.compatibility else "not_applicable"
    )
    score = SCORES.get(verdict, 0)
    if score is None:
        return None
    return score + (NAMED_EP_BONUS if variant.ep else 0)


def select_variant(
    package: Package, target: EpTarget, pin: str | None = None
) -> tuple[Variant, str]:
    """The variant to serve on ``target`` and why; a :class:`StartupError` listing the
    variants when none runs there. ``pin`` (GENAI_MODEL_VARIANT) names one; it must still
    run there."""
    scored = [(v, _score(v, target)) for v in package.variants]
    usable = [(v, s) for v, s in scored if s is not None]
    where = f"the {target.provider} execution provider ({target.ep_name})"
    if pin:
        named = [(v, s) for v, s in scored if v.name == pin.strip().strip("/")]
        if not named:
            raise _fail(
                package.root,
                f"GENAI_MODEL_VARIANT={pin} names none of its variants: {package.listing()}",
            )
        variant, score = named[0]
        if score is None:
            raise _fail(
                package.root,
                f"its variant {variant.describe()} does not run on {where}; it has: "
                f"{package.listing()}",
            )
        return variant, f"pinned by GENAI_MODEL_VARIANT={pin}"
    if not usable:
        raise _fail(
            package.root,
            f"no variant for {where}; it has: {package.listing()}. Set GENAI_DEVICE to a "
            "provider it has a variant for",
        )
    best, score = max(usable, key=lambda pair: pair[1])  # max keeps the first of equals
    why = f"score {score} on {where}"
    others = [v.describe() for v in package.variants if v is not best]
    if others:
        why += f"; also there: {'; '.join(others)}"
    return best, why


def machine_target(provider: str) -> EpTarget:
    """``provider`` as onnxruntime sees it on this machine: its hardware kinds, and its own
    judgement of compatibility strings (onnxruntime's ``get_model_compatibility_for_ep_devices``,
    the callback its selector calls). Not applicable where onnxruntime cannot say."""
    ep_name = EP_NAMES.get(provider, provider)
    try:
        import onnxruntime
        from onnxruntime.capi import _pybind_state as capi

        ep_devices = [d for d in onnxruntime.get_ep_devices() if d.ep_name == ep_name]
    except Exception:  # no onnxruntime, or one without the device API: nothing to ask
        return EpTarget(provider, ep_name)

    def kind(device: Any) -> str:
        return str(getattr(device.device.type, "name", device.device.type)).lower()

    def judge(string: str, kinds: tuple[str, ...]) -> str:
        chosen = [d for d in ep_devices if not kinds or kind(d) in kinds]
        try:
            verdict = capi.get_model_compatibility_for_ep_devices(chosen, string)
        except Exception:  # onnxruntime's selector counts a failed check as not applicable
            return "not_applicable"
        name = str(getattr(verdict, "name", verdict)).lower().removeprefix("ep_")
        return name.removeprefix("supported_") if name.startswith("supported_") else name

    return EpTarget(provider, ep_name, tuple(dict.fromkeys(kind(d) for d in ep_devices)), judge)


def resolve_ref(package: Package, variant: Variant, value: str, what: str) -> Path:
    """A path in a variant's genai_config.json as og resolves it in a package: a
    ``sha256:<hex>[/tail]`` shared asset, else a path relative to the variant's folder."""
    root = package.root
    if not value.startswith("sha256:"):
        return _confined(root, variant.directory, value, package.portable, what)
    digest, _, tail = value.removeprefix("sha256:").partition("/")
    if not _HEX.fullmatch(digest):
        raise _fail(
            root,
            f"{what} {value!r} in variant {variant.name!r} is not a sha256:<64 lowercase hex "
            "digits> reference",
        )
    asset = package.assets.get(digest)
    if asset is None:
        raise _fail(
            root,
            f"{what} in variant {variant.name!r} names the shared asset sha256:{digest}, which "
            f"the package does not have (no shared_assets/sha256-{digest}/ and no manifest "
            "override)",
        )
    path = _confined(root, asset, tail, True, what)  # a tail stays in its asset
    if not path.exists():
        raise _fail(
            root, f"{what} {value!r} in variant {variant.name!r}: {_rel(root, path)} is missing"
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
        raise _fail(
            root, f"variant {variant.name!r}'s folder {_rel(root, variant.directory)} is missing"
        )
    config = _read_json(
        root, variant.directory / "genai_config.json", f"variant {variant.name!r}'s"
    )
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise _fail(root, f"variant {variant.name!r}'s genai_config.json has no model section")
    links: dict[str, Path] = {}
    tokenizer_dir = config["model"].pop("tokenizer_dir", None)
    if tokenizer_dir:
        folder = resolve_ref(package, variant, str(tokenizer_dir), "model.tokenizer_dir")
        if not folder.is_dir():
            raise _fail(
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
        raise _fail(
            root,
            f"variant {variant.name!r} is missing its model file {filename} (named by its "
            "genai_config.json)",
        )
    if "tokenizer.json" not in links and "tokenizer.model" not in links:
        raise _fail(
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
    raise _fail(
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
