"""``python -m bench spec``'s requests, fresh for every seed, and how much of an answer copies
its prompt.

The issue's workloads, as a coding agent sends them:

- ``edit``: a source file in the prompt, and the answer should be the file rewritten with one
  change (60-90% of it copies);
- ``diff``: the file, and the answer should be a unified diff of one change, with context;
- ``free``: a question about made-up words: nothing to copy (the overhead).

And ``copy``, what the trained demo model does copy: three paths or three commands read back
("Repeat exactly: ...", "Echo back: ..."). The demo model never learnt to rewrite a file (it
answers ``edit`` and ``diff`` with a tool call or a path of its own): each answer's copied
fraction says how much of it the prompt held, whatever the model.

The files are small made-up Python modules (8 to 14 lines, their names and values drawn from
the seed), so a prompt and its answer stay within the demo model's 512-token window, where
llama.cpp (which has no sliding window) computes the same model.
"""

from __future__ import annotations

import random

WORKLOADS = ("edit", "diff", "free", "copy")
# An answer character is copied if a run of this many characters around it stands in the
# prompt (a path, a line, a word with its neighbours).
COPY_SPAN = 8
_NAMES = "cache config loader report session store token queue worker index batch".split()
_VALUES = "10 30 64 128 256 0.5 2.0 True False".split()
EDIT_SYSTEM = "You edit source files. Answer with the whole file, changed, and nothing else."


def source_file(rng: random.Random) -> tuple[str, str, str, str]:
    """A small Python module, and one change to make to it: (path, text, old, new)."""
    noun, other = rng.sample(_NAMES, 2)
    constant = f"{noun.upper()}_{rng.choice(['LIMIT', 'SIZE', 'TIMEOUT', 'RETRIES'])}"
    value = rng.choice(_VALUES)
    lines = [
        "import os",
        "from pathlib import Path",
        "",
        f'ROOT = Path(os.environ.get("{noun.upper()}_ROOT", "/var/lib/{noun}"))',
        f"{constant} = {value}",
        "",
        "",
        f"def load_{noun}(name: str) -> str:",
        "    return (ROOT / name).read_text()",
    ]
    if rng.random() < 0.7:
        lines += [
            "",
            "",
            f"def {other}_path({other}: str) -> Path:",
            f'    return ROOT / "{other}" / {other}',
        ]
    if rng.random() < 0.5:
        lines += ["", "", f"def {noun}_limit() -> int:", f"    return int({constant})"]
    new_value = rng.choice([v for v in _VALUES if v != value])
    path = f"src/{noun}/{other}_{rng.randint(1, 99)}.py"
    return path, "\n".join(lines) + "\n", f"{constant} = {value}", f"{constant} = {new_value}"


def ask(workload: str, seed: int) -> list[dict[str, str]]:
    """A fresh request of ``workload``: its chat messages."""
    from bench.harness.prompts import words
    from modelkit.demo.agent_values import CorpusRandom, command, path

    if workload == "free":
        return [{"role": "user", "content": f"#{seed} Tell me about {words(12, seed)}."}]
    if workload == "copy":
        corpus = CorpusRandom(seed, made_up=0.3, depth=7, prefixed=False)
        if seed % 2:
            values = " ".join(path(corpus) for _ in range(3))
            return [{"role": "user", "content": "Repeat exactly: " + values}]
        values = " && ".join(command(corpus) for _ in range(3))
        return [{"role": "user", "content": "Echo back: " + values}]
    rng = random.Random(seed)
    name, text, old, new = source_file(rng)
    if workload == "edit":
        ask = f"Here is {name}:\n\n{text}\nChange `{old}` to `{new}` and answer with the file."
        return [{"role": "system", "content": EDIT_SYSTEM}, {"role": "user", "content": ask}]
    if workload == "diff":
        ask = (
            f"Here is {name}:\n\n{text}\nWrite a unified diff of {name} that changes `{old}` "
            f"to `{new}`, with three lines of context."
        )
        return [{"role": "user", "content": ask}]
    raise ValueError(f"unknown workload {workload!r}: one of {', '.join(WORKLOADS)}")


def copied_fraction(prompt: str, answer: str, span: int = COPY_SPAN) -> float:
    """The share of ``answer``'s characters that lie in a run of ``span`` characters standing
    in ``prompt`` (0 for an empty answer)."""
    if not answer:
        return 0.0
    if len(answer) < span:
        return 1.0 if answer in prompt else 0.0
    known = {prompt[i : i + span] for i in range(len(prompt) - span + 1)}
    covered = [False] * len(answer)
    for i in range(len(answer) - span + 1):
        if answer[i : i + span] in known:
            covered[i : i + span] = [True] * span
    return sum(covered) / len(answer)
