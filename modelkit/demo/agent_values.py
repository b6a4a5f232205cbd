"""The values an agent turn of the demo corpus draws: instruction prose, paths, commands and
made-up words, from the corpus's own word lists (no client's text is copied), and the seeded
random source with its share of made-up values (modelkit/demo/agent_corpus.py builds the
turns from them)."""

from __future__ import annotations

import random

from modelkit.demo.corpus import NOUNS, sentence

ROLES = "coding agent|software assistant|terminal assistant|helpful agent|code reviewer".split("|")
PRODUCTS = "a terminal|an editor|a command line tool|a web app|the workspace|a sandbox".split("|")
SECTIONS = (
    "General|Tone and style|Using tools|Editing files|Safety|Planning|Testing|Git|Output|"
    "Environment|Sandbox and approvals|Working with the user|Final answer|Code style|Tasks"
).split("|")
OPENERS = (
    "Always|Never|Prefer to|Do not|Try to|Make sure to|You may|You should|Remember to|Only"
).split("|")
ACTIONS = (
    "read|edit|run|check|write|explain|test|search|ask about|keep|use|avoid|follow|describe|"
    "summarize|format|mention|create|delete|commit|review|open|change|fix|list|quote|update"
).split("|")
OBJECTS = (
    "the files|the user's code|a command|the tests|short answers|the repository|the tools|"
    "markdown|a plan|the output|absolute paths|the instructions|the working tree|a patch|"
    "the diff|code blocks|the request|a summary|the error|new files|the branch|the logs"
).split("|")
CONDITIONS = (
    "when the user asks|before you make a change|unless the user says so|if it helps|"
    "in the sandbox|after each step|when a command fails|for every task|at the end|"
    "when you are not sure|while you work|if the task is large|before the final answer"
).split("|")
TAGS = "context|environment_context|system-reminder|reminder|workspace|notes|instructions".split(
    "|"
)
WORDS = (
    "hello world test done ok fine build check ready alpha beta gamma delta avocado apple "
    "lemon orange banana cherry secret word note value port 42 7 2026 main dev one two three"
).split()
DIRS = "src docs tests work tmp home app lib data notes build out project repo".split()
STEMS = "notes main README config todo app index test data report log setup utils".split()
EXTS = "txt md py json toml csv log yaml js ts".split()


def instruction(rng: random.Random) -> str:
    """One line of generic agent instructions."""
    kind = rng.random()
    core = f"{rng.choice(OPENERS)} {rng.choice(ACTIONS)} {rng.choice(OBJECTS)}"
    if kind < 0.45:
        return f"- {core} {rng.choice(CONDITIONS)}."
    if kind < 0.6:
        return f"IMPORTANT: {core} {rng.choice(CONDITIONS)}."
    if kind < 0.75:
        when = rng.choice(CONDITIONS)
        return f"{core.capitalize()} {when}, and {rng.choice(ACTIONS)} {rng.choice(OBJECTS)}."
    if kind < 0.85:
        tool = f"{rng.choice(WORDS)} {rng.choice(DIRS)}"
        return f"- Use `{tool}` to {rng.choice(ACTIONS)} {rng.choice(OBJECTS)}."
    return sentence(rng)


def prose(rng: random.Random, lines: int) -> str:
    """A system prompt's instructions: an opening line, then sections of instruction lines."""
    out = [f"You are a {rng.choice(ROLES)} running in {rng.choice(PRODUCTS)}."]
    while len(out) < lines:
        out += ["", f"{rng.choice(['#', '##', '###'])} {rng.choice(SECTIONS)}", ""]
        out += [instruction(rng) for _ in range(rng.randint(2, 9))]
    return "\n".join(out)


class CorpusRandom(random.Random):
    """The corpus's random source, with its share of made-up values: with ``made_up`` > 0
    that share of path parts, file stems and echoed words are random letters and digits, so a
    call can only write them by copying them from the request (see :func:`copy_turn`)."""

    def __init__(
        self,
        seed: int,
        made_up: float = 0.0,
        depth: int = 5,
        tools: int = 2,
        prefixed: bool = False,
    ) -> None:
        super().__init__(seed)
        self.made_up = made_up
        self.depth = depth  # the most folders in a path
        self.tools = tools  # the most unrelated tools offered beside the ones asked for
        self.prefixed = prefixed  # made-up words may start with a real one (tmp, notes-, read_)

    def invented(self) -> str | None:
        """A made-up word, or None (most of the time, and always without ``made_up``)."""
        if self.random() >= self.made_up:
            return None
        letters = "".join(self.choice(LETTERS) for _ in range(self.randint(3, 10)))
        if self.prefixed and self.random() < 0.5:
            head = self.choice(WORDS + STEMS + DIRS + ["tmp", "tmp", "pytest", "test"])
            return head + self.choice(["", "", "-", "_", "."]) + letters
        return letters


LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"


def made_up_word(rng: random.Random) -> str | None:
    return rng.invented() if isinstance(rng, CorpusRandom) else None


def path(rng: random.Random, absolute: float = 0.7) -> str:
    """A file path: relative, or absolute with a few folders (some like a test's temp folder)."""
    name = f"{made_up_word(rng) or rng.choice(STEMS + NOUNS[:12])}.{rng.choice(EXTS)}"
    if rng.random() > absolute:
        return "/".join(rng.sample(DIRS, rng.randint(0, 2)) + [name])
    if isinstance(rng, CorpusRandom) and rng.depth > 5 and rng.random() < 0.25:
        return f"{temp_folder(rng)}/{name}"
    parts = []
    for _ in range(rng.randint(1, rng.depth if isinstance(rng, CorpusRandom) else 5)):
        r = rng.random()
        invented = made_up_word(rng)
        if invented:
            parts.append(invented)
        elif r < 0.5:
            parts.append(rng.choice(DIRS))
        elif r < 0.7:
            head = f"{rng.choice(DIRS)}-{rng.choice(['of', 'for'])}"
            parts.append(f"{head}-{rng.choice(['root', 'user', 'ci'])}")
        elif r < 0.85:
            parts.append(f"{rng.choice(DIRS)}-{rng.randint(0, 99)}")
        else:
            head = f"test_{rng.choice(NOUNS)}_{rng.choice(ACTIONS).split()[0]}"
            parts.append(f"{head}_{rng.choice(NOUNS)}{rng.randint(0, 9)}")
    return "/" + "/".join(parts + [name])


def temp_folder(rng: CorpusRandom) -> str:
    """A temporary folder as tests and tools make them (pytest's, mkdtemp's, macOS's), its
    made-up parts random."""

    def made(lo: int, hi: int) -> str:
        return "".join(rng.choice(LETTERS) for _ in range(rng.randint(lo, hi)))

    r = rng.random()
    if r < 0.5:
        words = "_".join(rng.choice(NOUNS + ACTIONS + DIRS).split()[0] for _ in range(4))
        test = f"test_{words}"[: rng.randint(12, 30)] + str(rng.randint(0, 9))
        user = rng.choice(["root", "user", "ci", made(3, 8)])
        sub = rng.choice(["", "/work", "/" + rng.choice(DIRS)])
        return f"/tmp/pytest-of-{user}/pytest-{rng.randint(0, 99)}/{test}{sub}"
    if r < 0.8:
        return f"/tmp/tmp{made(8, 8)}"
    return f"/var/folders/{made(2, 2)}/{made(20, 30)}/T/{made(6, 10)}"


def command(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.35:
        words = (made_up_word(rng) or rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        return f"echo {' '.join(words)}"
    if r < 0.55:
        return f"cat {path(rng, 0.4)}"
    return rng.choice(
        ["ls", "pwd", "date", "ls -la", "git status", "git log", "python --version", "uname -a",
         "df -h", "make test", "pytest -q", "whoami", "git diff", f"ls {rng.choice(DIRS)}",
         f"wc -l {path(rng, 0.3)}", f"head {path(rng, 0.3)}"]
    )  # fmt: skip
