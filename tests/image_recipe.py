"""What an image's Dockerfile installs and runs, read from the Dockerfile itself, so that the
runtime-only install test (tests/test_runtime_install.py) stands in for the image on machines
that cannot run containers and cannot drift from it.

The final stage's recipe: the requirement files its ``pip install`` reads, the shell steps that
make them (Dockerfile.cuda's pin swap), the environment, the working directory and the command.
Paths inside the image map back to this checkout: a ``COPY`` destination to its source, and
``/tmp/...`` (the build's scratch) to a folder of the caller's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = "/tmp/"


@dataclass(frozen=True)
class ImageRecipe:
    dockerfile: str
    copies: dict[str, str]  # image path -> build-context path (COPY in the final stage)
    shell_steps: tuple[str, ...]  # the install RUN's other commands (e.g. a sed swap), as written
    requirement_files: tuple[str, ...]  # image paths that `pip install -r` reads
    env: dict[str, str]  # the final stage's ENV, build arguments substituted
    workdir: str
    app_from: str  # the image path the app folder is copied from (the source stage's copy)
    app_drops: tuple[str, ...]  # what the source stage removes from the context
    healthcheck: list[str]
    command: list[str]

    def local(self, image_path: str, scratch: Path) -> Path:
        """Where an image path's content lies for a run here: the build's /tmp is ``scratch``,
        another COPY destination is its source in this checkout."""
        if image_path.startswith(SCRATCH):
            return scratch / image_path.removeprefix(SCRATCH)
        if image_path in self.copies:
            return ROOT / self.copies[image_path]
        raise ValueError(f"{self.dockerfile}: {image_path} has no counterpart outside the image")

    def prepare_install(self, scratch: Path) -> list[Path]:
        """The install's steps as the build runs them, with /tmp moved to ``scratch``: the
        COPYs into /tmp, then the shell steps (a failing one raises). Returns the requirement
        files that pip then reads."""
        for dest, src in self.copies.items():
            if dest.startswith(SCRATCH):
                shutil.copy(ROOT / src, self.local(dest, scratch))
        for step in self.shell_steps:
            done = subprocess.run(
                ["sh", "-c", step.replace(SCRATCH, f"{scratch}/")],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                raise RuntimeError(f"{self.dockerfile}: `{step}` failed: {done.stderr}")
        return [self.local(f, scratch) for f in self.requirement_files]

    def local_env(self, scratch: Path) -> dict[str, str]:
        """The image's environment with its paths mapped as ``local`` maps them."""
        env = {}
        for key, value in self.env.items():
            mapped = value.startswith(SCRATCH) or value in self.copies
            env[key] = str(self.local(value, scratch)) if mapped else value
        return env


# -- the build context: this checkout minus .dockerignore, read as Docker reads it ----------


def _regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go's filepath.Match plus ``**``), anchored at the context root."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def ignore_rules(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.removeprefix("!").strip()).lstrip("/")
        assert "[" not in pattern, f"character classes are not read here: {line}"
        rules.append((negated, _regex(pattern)))
    return rules


def excluded(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """The last rule matching the path, or one of its parent folders, decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for negated, regex in rules:
        if any(regex.fullmatch(p) for p in prefixes):
            result = not negated
    return result


def build_context() -> set[str]:
    """The files Docker sends as the build context: every file here minus .dockerignore."""
    rules = ignore_rules((ROOT / ".dockerignore").read_text())
    prune = not any(negated for negated, _ in rules)
    files: set[str] = set()
    for folder, dirs, names in os.walk(ROOT):
        rel = Path(folder).relative_to(ROOT).as_posix()
        prefix = "" if rel == "." else rel + "/"
        if prune:
            dirs[:] = [d for d in dirs if not excluded(prefix + d, rules)]
        files.update(prefix + n for n in names if not excluded(prefix + n, rules))
    return files


def _stages(parser: DockerfileParser) -> list[list[dict[str, str]]]:
    stages: list[list[dict[str, str]]] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            stages.append([])
        elif stages and instruction["instruction"] != "COMMENT":
            stages[-1].append(instruction)
    return stages


def _flags(value: str) -> tuple[list[str], str]:
    """Leading ``--flag=...`` options of an instruction, and the rest."""
    flags = []
    while match := re.match(r"\s*(--\S+)\s+", value):
        flags.append(match.group(1))
        value = value[match.end() :]
    return flags, value.strip()


def read_recipe(dockerfile: str) -> ImageRecipe:
    with (ROOT / dockerfile).open("rb") as f:
        parser = DockerfileParser(fileobj=f)
        args = dict(parser.args)
        env = dict(parser.envs)
        *sources, final = _stages(parser)
    [source] = sources  # one build stage that holds the context
    app_from, drops = "", []
    for instruction in source:
        kind, value = instruction["instruction"], instruction["value"]
        if kind == "COPY":
            src, app_from = value.split()
            assert src == ".", f"{dockerfile}: the source stage copies {src}, not the context"
        elif kind == "RUN" and (m := re.fullmatch(r"rm -rf (\S+)", value)):
            drops.append(m.group(1).removeprefix(app_from + "/"))
        else:
            raise AssertionError(f"{dockerfile}: source stage step not understood: {kind} {value}")

    copies: dict[str, str] = {}
    steps: list[str] = []
    files: list[str] = []
    workdir, app_dest, healthcheck, command = "/", "", [], []
    for instruction in final:
        kind, value = instruction["instruction"], instruction["value"]
        if kind == "COPY":
            flags, rest = _flags(value)
            src, dest = rest.split()
            if flags == ["--from=source"]:
                assert src == app_from, f"{dockerfile}: COPY --from=source {src}"
                app_dest = dest
            else:
                assert not flags, f"{dockerfile}: COPY {value}"
                copies[dest] = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], src)
        elif kind == "RUN" and "pip install" in value:
            for step in _flags(value)[1].split("&&"):
                words = shlex.split(step)
                if "pip" in words and "install" in words:
                    files += [words[i + 1] for i, w in enumerate(words) if w == "-r"]
                elif words[:3] in (["python", "-m", "venv"], ["python3", "-m", "venv"]):
                    continue  # the test makes its own environment
                elif words[0] != "rm":
                    steps.append(" ".join(step.split()))
        elif kind == "WORKDIR":
            workdir = value
        elif kind == "HEALTHCHECK":
            healthcheck = json.loads(_flags(value)[1].removeprefix("CMD").strip())
        elif kind == "CMD":
            command = json.loads(value)
    assert files, f"{dockerfile}: no `pip install -r` found"
    assert app_dest == workdir, f"{dockerfile}: the app is copied to {app_dest}, run in {workdir}"
    return ImageRecipe(
        dockerfile=dockerfile,
        copies=copies,
        shell_steps=tuple(steps),
        requirement_files=tuple(files),
        env=env,
        workdir=workdir,
        app_from=app_from,
        app_drops=tuple(drops),
        healthcheck=healthcheck,
        command=command,
    )
