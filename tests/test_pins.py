"""The engine's versions are pinned, and the installed ones are the pinned ones (issue 17).

Float results, the KV cache's layout and the sampler's random streams change with
onnxruntime, onnxruntime-genai and numpy: a run on other versions is not the run the notes,
the benchmark and the tests describe, so it fails here instead of differing silently."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
# Each pinned package, and the builds of it that stand in for it (Dockerfile.cuda's swap).
PINNED = {
    "onnxruntime-genai": (
        "onnxruntime-genai",
        "onnxruntime-genai-cuda",
        "onnxruntime-genai-directml",
    ),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml"),
    "llguidance": ("llguidance",),
}
# What changes numbers or the engine: each needs an upper bound.
BOUNDED = ("onnxruntime-genai", "onnxruntime", "llguidance", "numpy", "jinja2")


def requirements(name: str) -> dict[str, Requirement]:
    reqs = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            reqs[req.name.lower()] = req
    return reqs


def pin(req: Requirement) -> str:
    [spec] = list(req.specifier)
    assert spec.operator == "==", f"{req} is not pinned to one version"
    return spec.version


def installed(names: tuple[str, ...]) -> tuple[str, str]:
    found = []
    for name in names:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    assert len(found) == 1, f"expected exactly one of {names} installed, found {found}"
    return found[0]


@pytest.mark.parametrize("package", PINNED)
def test_the_installed_engine_is_the_pinned_one(package: str) -> None:
    wanted = pin(requirements("requirements.txt")[package])
    dist, version = installed(PINNED[package])
    assert version == wanted, (
        f"{dist} {version} is installed, requirements.txt pins {package}=={wanted}: reinstall "
        "from requirements.txt with constraints.txt, or move the pin on purpose (re-run the "
        "benchmark and the notes' checks on the new version)"
    )


@pytest.mark.parametrize("package", PINNED)
def test_constraints_agree_with_the_requirements(package: str) -> None:
    wanted = pin(requirements("requirements.txt")[package])
    assert pin(requirements("constraints.txt")[package]) == wanted


@pytest.mark.parametrize("package", BOUNDED)
def test_what_changes_numerics_has_an_upper_bound(package: str) -> None:
    spec = requirements("requirements.txt")[package].specifier
    assert any(s.operator in ("==", "<", "<=", "~=") for s in spec), f"{package}: {spec}"
