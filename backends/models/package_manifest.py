"""An ONNX Runtime model package's manifest (``NAME.ortpackage/manifest.json``), read as
onnxruntime reads it (:mod:`backends.models.package` says why this server reads it itself):

- schema major 1; exactly one component, inline or ``component.json``;
- variants with ``ep``, ``device``, ``compatibility_string``, ``variant_directory``;
- ``shared_assets/sha256-<hex>/`` folders and the manifest's ``shared_assets`` overrides;
- paths relative to the package and, in a portable package, confined to it.

A :class:`StartupError` names what is wrong, in one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from backends.errors import StartupError

MANIFEST = "manifest.json"
SCHEMA_MAJOR = 1  # the manifest majors onnxruntime 1.31 reads
SCHEMA_MINOR = 0  # the newest minor known here: a newer one may carry fields we skip

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
HEX = re.compile(r"[0-9a-f]{64}")
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


def fail(root: Path, why: str) -> StartupError:
    return StartupError(f"Model package {root}: {why}")


def read_json(root: Path, file: Path, what: str) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise fail(root, f"{what} {rel(root, file)} is missing") from None
    except OSError as exc:
        raise fail(root, f"cannot read {what} {rel(root, file)} ({exc.strerror})") from None
    except ValueError as exc:
        raise fail(root, f"{what} {rel(root, file)} is not valid JSON ({exc})") from None


def rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def confined(root: Path, base: Path, value: str, portable: bool, what: str) -> Path:
    """``value`` (a relative POSIX path) under ``base``; in a portable package no absolute
    path and no ``..``, and the result stays in the package once links are followed."""
    pure = PurePosixPath(value)
    if portable and (pure.is_absolute() or ".." in pure.parts or re.match(r"^[A-Za-z]:", value)):
        raise fail(
            root,
            f"{what} {value!r} leaves the package (a portable package names paths inside it, "
            "without '..' or a leading '/')",
        )
    path = base / Path(*pure.parts) if pure.parts else base
    if portable and not path.resolve().is_relative_to(root.resolve()):
        raise fail(root, f"{what} {value!r} leads outside the package")
    return path


def _unknown(root: Path, body: dict[str, Any], known: set[str], where: str) -> None:
    extra = sorted(set(body) - known)
    if extra:
        raise fail(root, f"{where} has unknown field {extra[0]!r}")


def _schema(root: Path, value: Any) -> tuple[int, int]:
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    match = re.fullmatch(r"(\d+)(?:\.(\d+))?", text)
    if not match:
        raise fail(root, f"manifest.json's schema_version {value!r} is not '<major>.<minor>'")
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    if major != SCHEMA_MAJOR:
        raise fail(
            root, f"manifest.json's schema_version {text} is not one this server reads (1.x)"
        )
    return major, minor


def read_package(root: Path) -> Package:
    """The package's one component, its variants in declaration order and its shared assets;
    a :class:`StartupError` naming what is wrong."""
    manifest = read_json(root, root / MANIFEST, "its manifest")
    if not isinstance(manifest, dict):
        raise fail(root, "manifest.json is not a JSON object")
    if "schema_version" not in manifest:
        raise fail(root, "manifest.json has no schema_version")
    _, minor = _schema(root, manifest["schema_version"])
    strict = minor <= SCHEMA_MINOR  # a newer minor may add optional fields: read past them
    if strict:
        _unknown(root, manifest, _MANIFEST_KEYS, "manifest.json")
    layout = manifest.get("layout", "portable")
    if layout not in ("portable", "installed"):
        raise fail(root, f"manifest.json's layout {layout!r} is neither portable nor installed")
    portable = layout == "portable"
    components = manifest.get("components")
    if not isinstance(components, dict) or not components:
        raise fail(root, "manifest.json declares no components")
    if len(components) != 1:
        names = ", ".join(sorted(components))
        raise fail(
            root,
            f"it declares {len(components)} components ({names}); onnxruntime-genai serves a "
            "package of exactly one",
        )
    ((component, body),) = components.items()
    component_dir = root
    if isinstance(body, str):  # an external component: a folder with component.json, or a file
        path = confined(root, root, body, portable, f"component {component!r}")
        if path.is_dir():
            path = path / "component.json"
        body = read_json(root, path, f"component {component!r}'s file")
        component_dir = path.parent
    if not isinstance(body, dict):
        raise fail(root, f"component {component!r} is not a JSON object")
    if strict:
        _unknown(root, body, _COMPONENT_KEYS, f"component {component!r}")
    variants = body.get("variants")
    if not isinstance(variants, dict):
        raise fail(root, f"component {component!r} has no 'variants' object")
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
        raise fail(root, f"{where} is not a JSON object")
    if strict:
        _unknown(root, body, _VARIANT_KEYS, where)
    fields: dict[str, str | None] = {}
    for key in ("variant_directory", "ep", "device", "compatibility_string"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise fail(root, f"{where}'s {key} is not a string")
        fields[key] = value or None
    directory = confined(root, component_dir, fields["variant_directory"] or name, portable, where)
    device = fields["device"].lower() if fields["device"] else None
    return Variant(name, directory, fields["ep"], device, fields["compatibility_string"])


def _assets(root: Path, manifest: dict[str, Any], portable: bool) -> dict[str, Path]:
    """sha256 hex -> folder: the manifest's overrides first, then shared_assets/sha256-<hex>/."""
    found: dict[str, Path] = {}
    overrides = manifest.get("shared_assets", {})
    if not isinstance(overrides, dict):
        raise fail(root, "manifest.json's shared_assets is not an object")
    for uri, value in overrides.items():
        digest = str(uri).removeprefix("sha256:")
        if not str(uri).startswith("sha256:") or not HEX.fullmatch(digest):
            raise fail(root, f"shared_assets key {uri!r} is not a sha256:<64 hex digits> URI")
        if not isinstance(value, str):
            raise fail(root, f"shared_assets[{uri!r}] is not a path")
        found[digest] = confined(root, root, value, portable, f"shared asset {uri!r}")
    shared = root / "shared_assets"
    if shared.is_dir():
        for child in sorted(shared.iterdir()):
            match = _ASSET_DIR.fullmatch(child.name)
            if match and child.is_dir():
                found.setdefault(match.group(1), child)
    return found
