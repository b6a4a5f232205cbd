"""The layers, checked over the whole tree: every package imports only downward, and no module
imports, however indirectly, one that imports it back.

Every import counts: at module level, inside a function, or under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from config.settings import REPO_ROOT

pytestmark = pytest.mark.unit

# Every folder of Python in the tree (test_every_python_file_is_checked keeps it so).
FIRST_PARTY = (
    "backends", "config", "routes", "schemas", "metrics", "in_process", "bench", "modelkit",
    "scripts", "tests",
)  # fmt: skip
TOP_MODULES = ("app_onnx_genai", "main_genai")

# What a package (and everything under it) must not import: a module path, or a prefix of one.
FORBIDDEN: dict[str, set[str]] = {
    "backends": {
        "fastapi",
        "starlette",
        "sse_starlette",
        "uvicorn",
        "config",
        "schemas",
        "routes",
        "metrics",
        "in_process",
        "bench",
        "modelkit",
    },
    # backends/: core > engine, chat > models > the shared vocabulary (errors, types, config).
    "backends.engine": {"backends.chat", "backends.core"},
    "backends.chat": {"backends.engine", "backends.core"},
    "backends.models": {"backends.chat", "backends.engine", "backends.core"},
    # Speech is a model kind under the core (core/speech_service.py), beside chat and engine.
    "backends.speech": {"backends.core", "backends.chat", "backends.engine"},
    "backends.errors": {"backends.core", "backends.engine", "backends.chat", "backends.models"},
    "backends.types": {"backends.core", "backends.engine", "backends.chat", "backends.models"},
    "backends.config": {"backends.core", "backends.engine", "backends.chat", "backends.models"},
    "schemas": {"backends", "config", "routes", "in_process", "metrics", "bench", "modelkit"},
    # Configuration reads the core's vocabulary (a served model's fields, declared once in
    # backends.config) and nothing else of the core; it serves the launcher and the routes.
    "config": {
        "fastapi",
        "starlette",
        "routes",
        "in_process",
        "metrics",
        "app_onnx_genai",
        "main_genai",
        "backends.core",
        "backends.engine",
        "backends.chat",
        "backends.models",
        "backends.speech",
        "bench",
        "modelkit",
    },
    "metrics": {"routes", "schemas", "config", "in_process", "bench", "modelkit"},
    "in_process": {
        "routes",
        "fastapi",
        "starlette",
        "app_onnx_genai",
        "main_genai",
        "bench",
        "modelkit",
    },
    # The server never imports its benchmark, nor the model-building kit: the kit is
    # build-time code (only `main_genai.py export` imports it, on demand), and it imports none
    # of the server's layers above the models (the Whisper build reads backends.speech's
    # language codes).
    "routes": {"bench", "modelkit"},
    "app_onnx_genai": {"bench", "modelkit"},
    "main_genai": {"bench"},
    "modelkit": {
        "routes",
        "schemas",
        "config",
        "metrics",
        "in_process",
        "app_onnx_genai",
        "main_genai",
        "bench",
    },
    # bench/: the command line > benchmarks > probes, peers, reports > the harness. A report
    # and the harness know no benchmark; the harness knows no peer either.
    "bench.harness": {
        "bench.benchmarks",
        "bench.probes",
        "bench.peers",
        "bench.reports",
        "bench.commands",
        "bench.__main__",
    },
    "bench.reports": {"bench.benchmarks", "bench.probes", "bench.commands", "bench.__main__"},
    "bench.peers": {"bench.benchmarks", "bench.probes", "bench.commands", "bench.__main__"},
    "bench.probes": {"bench.benchmarks", "bench.commands", "bench.__main__"},
    "bench.benchmarks": {"bench.probes", "bench.commands", "bench.__main__"},
    # The plumbing serves every protocol and knows none of them.
    "routes.http": {
        "routes.native",
        "routes.openai",
        "routes.responses",
        "routes.anthropic",
        "routes.ollama",
        "routes.tokenizer",
        "routes.ops",
        "routes.audio",
    },
    "routes.door": {
        "routes.native",
        "routes.openai",
        "routes.responses",
        "routes.anthropic",
        "routes.ollama",
        "routes.tokenizer",
        "routes.ops",
        "routes.audio",
    },
}
# The tests and the operations scripts sit on top of everything: nothing imports them (the
# kit, the benchmark and the server alike).
for _package in (*FIRST_PARTY, *TOP_MODULES):
    if _package not in ("tests", "scripts"):
        FORBIDDEN.setdefault(_package, set()).update({"tests", "scripts"})
FORBIDDEN["scripts"] = {"tests"}


def module_name(path: Path) -> str:
    if not path.is_relative_to(REPO_ROOT):
        return path.stem
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> list[Path]:
    files = [REPO_ROOT / f"{name}.py" for name in TOP_MODULES]
    for package in FIRST_PARTY:  # not what a benchmark caches or writes (bench/.cache/, ...)
        files += sorted(
            f
            for f in (REPO_ROOT / package).rglob("*.py")
            if not any(part.startswith(".") for part in f.relative_to(REPO_ROOT).parts)
        )
    return files


def imports_of(path: Path, known: Iterable[str] = ()) -> set[str]:
    """The modules ``path`` imports. ``from a.b import c`` counts as ``a.b.c`` where that is a
    module of ours (``known``), else as ``a.b``; relative imports are resolved."""
    modules = set(known)
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in modules else base)
    return found


def import_graph() -> dict[str, set[str]]:
    files = source_files()
    names = {module_name(f) for f in files}
    return {module_name(f): imports_of(f, names) & names for f in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the modules on it (first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_nothing_it_must_not(package: str) -> None:
    files = [f for f in source_files() if within(module_name(f), package)]
    assert files, f"no modules under {package}"
    wrong = {
        module_name(f): sorted(
            imported
            for imported in imports_of(f)
            if any(within(imported, banned) for banned in FORBIDDEN[package])
        )
        for f in files
    }
    assert not {module: bad for module, bad in wrong.items() if bad}


def test_every_python_file_is_checked() -> None:
    """The whole tree: a new top-level folder of Python joins FIRST_PARTY (and gets its rules)
    before it can hold a circle or an upward import."""
    tracked = {
        f
        for f in REPO_ROOT.rglob("*.py")
        if not any(part.startswith(".") for part in f.relative_to(REPO_ROOT).parts)
    }
    assert tracked - set(source_files()) == set()


def test_no_module_imports_itself_back() -> None:
    assert find_cycle(import_graph()) is None


def test_the_checker_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from routes.x import Y\n"
        "def f():\n    from fastapi import FastAPI\n    import schemas.x\n"
    )
    assert imports_of(module) >= {"fastapi", "schemas.x", "routes.x"}


def test_the_cycle_finder_finds_a_cycle_and_only_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "d": {"a", "c"}}) is None
