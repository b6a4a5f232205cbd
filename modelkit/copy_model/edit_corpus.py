"""The copy model's training turns: what a coding agent asks of a model that edits files.

- ``edit``: a made-up source file in the prompt, one change asked for, and the whole file,
  changed, as the answer (most of it copies the prompt);
- ``diff``: the same ask, answered with a unified diff of the change (difflib's, three lines
  of context);
- ``free``: a question about made-up words, answered with plain text that copies nothing;
- ``copy``: paths or commands read back;
- ``repeat``: a file read back whole, unchanged: the copy phase's turns, which teach the model
  to copy before it learns the edits (as the demo recipe's copy phase does).

The files are Python modules drawn from a wider grammar than
``bench/benchmarks/spec_workloads.py``'s (imports, constants, functions, classes, comments,
6 to 40 lines) and the asks come in several wordings, so the benchmark's requests are of
the same kind as the training turns but never one of them. Seeded: the same seed gives the
same turns.
"""

from __future__ import annotations

import difflib
import random
from typing import Any

from modelkit.demo.agent_values import CorpusRandom, command, path
from modelkit.demo.plain_corpus import plain_text

KINDS = ("edit", "diff", "free", "copy", "repeat")
MIX = {"edit": 0.45, "diff": 0.3, "free": 0.15, "copy": 0.1}  # the share of each kind
COPY_MIX = {"repeat": 0.7, "copy": 0.15, "edit": 0.15}  # the copy phase's

_NOUNS = (
    "cache config loader report session store token queue worker index batch user order item "
    "file path record event job task client server request response stream buffer page block "
    "node graph table row column field entry key value name label limit count size timeout "
    "retry policy handler router model metric sample frame packet message channel topic"
).split()
_VERBS = (
    "load save read write parse build make find get set update delete check send fetch open "
    "close start stop run render format merge split sort filter count reset flush"
).split()
_IMPORTS = [
    "import os",
    "import re",
    "import sys",
    "import json",
    "import time",
    "import logging",
    "import hashlib",
    "from pathlib import Path",
    "from dataclasses import dataclass",
    "from typing import Any",
    "from collections import defaultdict",
    "from functools import lru_cache",
]
_VALUES = "0 1 2 3 5 8 10 16 30 32 60 64 100 128 256 512 1024 0.1 0.5 2.0 True False None".split()
_SUFFIXES = ["LIMIT", "SIZE", "TIMEOUT", "RETRIES", "PORT", "DEPTH", "WORKERS", "DELAY", "MAX"]
EDIT_SYSTEMS = [
    "You edit source files. Answer with the whole file, changed, and nothing else.",
    "You are a coding assistant. When asked to change a file, reply with the complete file.",
    "Rewrite files exactly as asked. Output only the file.",
]
_EDIT_ASKS = [
    "Change `{old}` to `{new}` and answer with the file.",
    "Replace `{old}` with `{new}`. Reply with the full file.",
    "Please change `{old}` into `{new}` and give me the whole file back.",
    "Edit it: `{old}` becomes `{new}`. Answer with the file.",
]
_DIFF_ASKS = [
    "Write a unified diff of {path} that changes `{old}` to `{new}`, with three lines of context.",
    "Give a unified diff for {path} replacing `{old}` with `{new}` (three lines of context).",
    "Show the change `{old}` -> `{new}` in {path} as a unified diff.",
]
_COPY_ASKS = ["Repeat exactly: ", "Echo back: ", "Say this back word for word: "]
_REPEAT_ASKS = [
    "Repeat the file exactly.",
    "Answer with the file, unchanged.",
    "Read the whole file back to me.",
]


def _ident(rng: random.Random) -> str:
    return "_".join(rng.sample(_NOUNS, rng.choice([1, 1, 2])))


def _function(rng: random.Random, constants: list[str], root: bool) -> list[str]:
    name = f"{rng.choice(_VERBS)}_{_ident(rng)}"
    arg = rng.choice(_NOUNS)
    kind = rng.choice(["str", "int", "Path", "dict", "list[str]", "bool"])
    out = [f"def {name}({arg}: {kind}) -> {rng.choice(['str', 'int', 'bool', 'None', 'Any'])}:"]
    if rng.random() < 0.4:
        out.append(f'    """{rng.choice(_VERBS).capitalize()} the {arg} {rng.choice(_NOUNS)}."""')
    for _ in range(rng.randint(1, 4)):
        shape = rng.random()
        other = rng.choice(_NOUNS)
        if shape < 0.3 and constants:
            out.append(f"    if len(str({arg})) > {rng.choice(constants)}:")
            out.append(f'        raise ValueError("{arg} is too long")')
        elif shape < 0.5:
            out.append(f"    {other} = {rng.choice(_VERBS)}_{rng.choice(_NOUNS)}({arg})")
        elif shape < 0.7:
            out.append(f"    for {other} in {arg}:")
            out.append(f"        {rng.choice(_VERBS)}_{rng.choice(_NOUNS)}({other})")
        elif shape < 0.85:
            out.append(f"    # {rng.choice(_VERBS)} the {other} first")
        else:
            out.append(f'    logging.info("{rng.choice(_VERBS)} %s", {arg})')
    returned = [arg, "None", "True", f"str({arg})", f"len({arg})"]
    if constants:
        returned.append(f"int({rng.choice(constants)})")
    if root:  # a path under the module's ROOT, or what it holds
        returned += [f"(ROOT / {arg}).read_text()", f'ROOT / "{rng.choice(_NOUNS)}" / {arg}']
    out.append(f"    return {rng.choice(returned)}")
    return out


def _class(rng: random.Random) -> list[str]:
    name = "".join(w.capitalize() for w in rng.sample(_NOUNS, 2))
    fields = rng.sample(_NOUNS, rng.randint(1, 4))
    out = ["@dataclass", f"class {name}:"]
    out += [f"    {f}: {rng.choice(['str', 'int', 'float', 'bool'])}" for f in fields]
    if rng.random() < 0.5:
        out += [
            "",
            f"    def {rng.choice(_VERBS)}(self) -> str:",
            f"        return str(self.{fields[0]})",
        ]
    return out


def source_file(rng: random.Random) -> tuple[str, str]:
    """A made-up Python module: (path, text)."""
    lines = sorted(rng.sample(_IMPORTS, rng.randint(1, 4)), key=lambda s: (s[0] == "f", s))
    constants = []
    lines.append("")
    root = rng.random() < 0.5
    if root:
        noun = rng.choice(_NOUNS)
        lines.append(f'ROOT = Path(os.environ.get("{noun.upper()}_ROOT", "/var/lib/{noun}"))')
    for _ in range(rng.randint(1, 4)):
        name = f"{rng.choice(_NOUNS).upper()}_{rng.choice(_SUFFIXES)}"
        if name not in constants:
            constants.append(name)
            lines.append(f"{name} = {rng.choice(_VALUES)}")
    while len(lines) < rng.randint(8, 36):
        lines += ["", ""]
        lines += _class(rng) if rng.random() < 0.25 else _function(rng, constants, root)
    folder = "/".join(rng.sample(_NOUNS, rng.randint(1, 2)))
    return f"{rng.choice(['src', 'lib', 'app', 'pkg'])}/{folder}/{_ident(rng)}.py", "\n".join(
        lines
    ) + "\n"


def change(rng: random.Random, text: str) -> tuple[str, str] | None:
    """One change to ``text``: (old, new), ``old`` a line or a part of one that stands in it
    once; None when the draw finds none."""
    lines = [line for line in text.splitlines() if line.strip() and text.count(line) == 1]
    if not lines:
        return None
    line = rng.choice(lines)
    stripped = line.strip()
    if " = " in stripped and not line.startswith(" "):
        name, value = stripped.split(" = ", 1)
        other = rng.choice([v for v in _VALUES if v != value])
        return stripped, f"{name} = {other}"
    if stripped.startswith("return "):
        values = ["None", "True", "False", "0", rng.choice(_NOUNS)]
        return stripped, f"return {rng.choice([v for v in values if f'return {v}' != stripped])}"
    if stripped.startswith("def "):
        old = stripped.split("(", 1)[0][4:]
        if text.count(old) == 1:
            return old, f"{rng.choice(_VERBS)}_{_ident(rng)}"
    if '"' in stripped:
        quoted = stripped.split('"')[1]
        if quoted and text.count(f'"{quoted}"') == 1:
            return f'"{quoted}"', f'"{rng.choice(_VERBS)} {rng.choice(_NOUNS)}"'
    return None


def _shown(name: str, text: str) -> str:
    """A file as a turn shows it, before the ask."""
    return f"Here is {name}:\n\n{text}\n"


def unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return "".join(lines)


def turn(kind: str, rng: random.Random) -> tuple[list[dict[str, str]], str]:
    """One training turn of ``kind``: its messages and the answer."""
    if kind in ("edit", "diff"):
        while True:
            name, text = source_file(rng)
            picked = change(rng, text)
            if picked is not None:
                break
        old, new = picked
        after = text.replace(old, new, 1)
        shown = _shown(name, text)
        if kind == "edit":
            messages = [
                {"role": "user", "content": shown + rng.choice(_EDIT_ASKS).format(old=old, new=new)}
            ]
            if rng.random() < 0.7:
                messages.insert(0, {"role": "system", "content": rng.choice(EDIT_SYSTEMS)})
            return messages, after
        ask = rng.choice(_DIFF_ASKS).format(path=name, old=old, new=new)
        return [{"role": "user", "content": shown + ask}], unified_diff(name, text, after)
    if kind == "repeat":
        name, text = source_file(rng)
        return [{"role": "user", "content": _shown(name, text) + rng.choice(_REPEAT_ASKS)}], text
    if kind == "free":
        words = " ".join(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
            for _ in range(rng.randint(2, 12))
        )
        corpus = CorpusRandom(rng.randrange(1 << 30))
        return [{"role": "user", "content": f"#{rng.randrange(10**6)} Tell me about {words}."}], (
            plain_text(corpus).removesuffix("<|im_end|>")
        )
    if kind == "copy":
        corpus = CorpusRandom(rng.randrange(1 << 30), made_up=0.3, depth=7, prefixed=False)
        if rng.random() < 0.5:
            values = " ".join(path(corpus) for _ in range(rng.randint(1, 5)))
        else:
            values = " && ".join(command(corpus) for _ in range(rng.randint(1, 4)))
        return [{"role": "user", "content": rng.choice(_COPY_ASKS) + values}], values
    raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")


def turns(n: int, seed: int, mix: dict[str, float] = MIX) -> list[tuple[list[dict[str, str]], str]]:
    """``n`` turns in the mix ``mix`` (``MIX``, or the copy phase's ``COPY_MIX``), seeded."""
    rng = random.Random(seed)
    kinds, weights = zip(*mix.items(), strict=True)
    return [turn(rng.choices(kinds, weights)[0], rng) for _ in range(n)]


def as_text(messages: list[dict[str, Any]], answer: str) -> str:
    """A turn as plain text, for a tokenizer's training."""
    return "\n".join(m["content"] for m in messages) + "\n" + answer
