"""The layers: backends/ knows no HTTP, schemas/ knows no backends, metrics/ knows no routes.

Every import counts, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from schemas.settings import REPO_ROOT

pytestmark = pytest.mark.unit

FORBIDDEN = {
    "backends": {"fastapi", "starlette", "sse_starlette", "schemas", "routes", "in_process"},
    "schemas": {"backends", "routes", "in_process"},
    "metrics": {"routes", "schemas"},
}


def imported_packages(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_nothing_it_must_not(package: str) -> None:
    files = sorted((REPO_ROOT / package).rglob("*.py"))
    assert files, f"no modules under {package}/"
    wrong = {
        str(f.relative_to(REPO_ROOT)): sorted(imported_packages(f) & FORBIDDEN[package])
        for f in files
    }
    assert not {f: bad for f, bad in wrong.items() if bad}


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from fastapi import FastAPI\n    import schemas.x\n")
    assert imported_packages(module) == {"fastapi", "schemas"}
