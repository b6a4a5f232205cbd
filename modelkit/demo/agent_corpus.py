"""Agent-shaped turns for the demo model's corpus: generated, seeded, generic.

Coding agents send a long system prompt (pages of instructions, then many tools with JSON
schemas), a few context messages, then the user's request last. This module makes turns of that
shape from its own word lists (no client's text is copied): instruction prose of varying
length, tools drawn from a few kinds (run a command, read a file, search, list, fetch, write)
under varying names and parameter names with optional parameters the call leaves out, plus
unrelated tools. The reply is

- a hermes call to the tool that does what the last request asks, with its required arguments
  copied from the request;
- after that call's result (a ``tool`` message), a short answer that says what it gave, then the
  end of the turn;
- a plain answer when the request needs no tool ("Say hello.").

Each turn comes with the places where a PoSE-style training run may skip positions (see
modelkit/demo/train.py): inside the instructions and between the tools and the request.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelkit.demo.agent_values import (
    DIRS,
    EXTS,
    STEMS,
    TAGS,
    WORDS,
    CorpusRandom,
    command,
    instruction,
    made_up_word,
    path,
    prose,
    temp_folder,
)
from modelkit.demo.corpus import NOUNS, answer, question, sentence, tool_reply


@dataclass(frozen=True)
class Kind:
    """A kind of tool: its names, its main parameter's names, descriptions, requests, a value
    generator, and what its result looks like."""

    names: tuple[str, ...]
    params: tuple[str, ...]
    descriptions: tuple[str, ...]
    asks: tuple[str, ...]
    value: Any
    result: Any


def _run_result(rng: random.Random, cmd: str) -> str:
    out = cmd[5:] if cmd.startswith("echo ") else " ".join(rng.choice(WORDS) for _ in range(3))
    if rng.random() < 0.5:
        return f"{out}\n"
    code = f"Process exited with code 0\nWall time: 0.{rng.randint(0, 9)} seconds\n"
    return f"Chunk ID: {rng.randint(100, 999)}\n{code}Output:\n{out}\n"


def _read_result(rng: random.Random, _path: str) -> str:
    text = f"The {rng.choice(WORDS)} word is {rng.choice(WORDS)}."
    return f"     1\t{text}\n" if rng.random() < 0.6 else text + "\n"


KINDS = [
    Kind(
        ("exec_command", "shell", "run_command", "bash", "Bash", "run_shell", "execute",
         "terminal"),
        ("cmd", "command"),
        ("Runs a command in a shell and returns its output.",
         "Run a shell command, returning its output or a session id.",
         "Executes a bash command in the working folder."),
        ("Run the command {v}.", "Run {v}.", "Please run `{v}`.", "Execute {v} in the shell.",
         "Run `{v}` and tell me what it prints."),
        command,
        _run_result,
    ),
    Kind(
        ("Read", "read_file", "view_file", "open_file", "ReadFile", "file_read"),
        ("file_path", "path", "filename"),
        ("Reads a file from the local filesystem.", "Read the contents of a file.",
         "Returns the text of a file, with line numbers."),
        ("Read the file {v} and tell me what it says.", "Read {v}.", "What does {v} say?",
         "Show me the file {v}.", "Open {v} and read it."),
        path,
        _read_result,
    ),
    Kind(
        ("grep", "Grep", "search_files", "find_text"),
        ("pattern", "query"),
        ("Searches the files for a pattern.", "Find text in the repository."),
        ("Search the code for {v}.", "Find {v} in the files.", "Grep for {v}."),
        lambda r: r.choice(WORDS + NOUNS),
        lambda r, v: f"{path(r, 0.2)}:{r.randint(1, 90)}: {v}\n",
    ),
    Kind(
        ("list_dir", "LS", "list_files", "ls"),
        ("path", "dir"),
        ("Lists the files in a folder.", "List a directory."),
        ("List the files in {v}.", "What is in the folder {v}?"),
        lambda r: "/" + "/".join(r.sample(DIRS, r.randint(1, 3))),
        lambda r, v: "\n".join(f"{s}.{r.choice(EXTS)}" for s in r.sample(STEMS, 3)) + "\n",
    ),
    Kind(
        ("web_fetch", "WebFetch", "fetch_url", "fetch"),
        ("url",),
        ("Fetches a web page and returns its text.", "Download a URL."),
        ("Fetch {v}.", "Get the page {v}.", "Open the page {v}."),
        lambda r: f"https://{r.choice(NOUNS)}.{r.choice(['com', 'org', 'dev'])}/{r.choice(NOUNS)}",
        lambda r, v: sentence(r) + "\n",
    ),
]  # fmt: skip

OPTIONAL = [  # optional parameters a call leaves out: (name, schema)
    ("timeout_ms", {"type": "number", "description": "How long to wait, in milliseconds."}),
    ("workdir", {"type": "string", "description": "The working folder. Defaults to the cwd."}),
    ("login", {"type": "boolean", "description": "Whether to use a login shell."}),
    ("offset", {"type": "integer", "description": "The line to start at.", "minimum": 0}),
    ("limit", {"type": "integer", "description": "How many lines to read.", "minimum": 1}),
    ("tty", {"type": "boolean", "description": "True allocates a terminal."}),
    ("mode", {"type": "string", "enum": ["fast", "full"], "description": "How to run."}),
    ("tags", {"type": "array", "items": {"type": "string"}, "description": "Labels to use."}),
    ("max_output_tokens", {"type": "number", "description": "Output token budget."}),
]


def schema(rng: random.Random, required: list[tuple[str, str]]) -> dict[str, Any]:
    """An object schema: the required parameters (name, description) and some optional ones."""
    props: dict[str, Any] = {n: {"type": "string", "description": d} for n, d in required}
    for name, spec in rng.sample(OPTIONAL, rng.randint(0, 3)):
        props.setdefault(name, spec)
    keys = list(props)
    rng.shuffle(keys)
    out: dict[str, Any] = {"type": "object", "properties": {k: props[k] for k in keys}}
    out["required"] = [n for n, _ in required]
    if rng.random() < 0.5:
        out["additionalProperties"] = False
    return out


def spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


VERBS = "get create update close view send wait spawn list stop run set".split()
THINGS = (
    "goal plan image agent input stdin task memory cron worktree notebook message skill "
    "workflow findings wakeup output resource"
).split()
PARAMS = (
    "status message id objective items chars prompt description subject target taskId "
    "reason action query method to cron"
).split()


def unrelated_tools(rng: random.Random) -> list[dict[str, Any]]:
    """The tools offered that no request here asks for: up to two, or with
    :class:`CorpusRandom`'s ``tools`` above 2, up to that many, often many (agents offer 10-30)."""
    most = rng.tools if isinstance(rng, CorpusRandom) else 2
    if most <= 2:
        return [other_tool(rng) for _ in range(rng.randint(0, 2))]
    n = min(most, int(most * rng.random() ** 1.5) + rng.randint(0, 2))
    return [many_tool(rng) for _ in range(n)]


def many_tool(rng: random.Random) -> dict[str, Any]:
    """An unrelated tool named as agents name theirs (``TaskCreate``, ``CronList``,
    ``Skill``, ``close_agent``) with zero to three required parameters."""
    verb, thing = rng.choice(VERBS), rng.choice(THINGS)
    name = rng.choice(
        [f"{verb}_{thing}", f"{thing.title()}{verb.title()}", f"{verb.title()}{thing.title()}",
         thing.title(), f"{thing}_{verb}"]
    )  # fmt: skip
    params = rng.sample(PARAMS, rng.choice([0, 0, 1, 1, 1, 2, 3]))
    return spec(
        name, f"{verb.title()} the {thing}.", schema(rng, [(q, f"The {q}.") for q in params])
    )


def other_tool(rng: random.Random) -> dict[str, Any]:
    """A tool no request here asks for (plans, goals, images, agents...)."""
    verb = rng.choice(["get", "create", "update", "close", "view", "send", "wait", "spawn"])
    noun = rng.choice(["goal", "plan", "image", "agent", "input", "stdin", "task", "memory"])
    name = rng.choice([f"{verb}_{noun}", f"{verb.title()}{noun.title()}"])
    more = " ".join(instruction(rng) for _ in range(rng.randint(0, 1)))
    text = f"{verb.title()} the {noun}. {more}".strip()
    param = rng.choice(["status", "message", "id", "objective", "items", "chars"])
    required = [(param, f"The {param}.")] if rng.random() < 0.7 else []
    return spec(name, text, schema(rng, required))


def context_message(rng: random.Random) -> str:
    """A context block a client puts before the request (environment, reminders)."""
    tag = rng.choice(TAGS)
    cwd = path(rng, 1.0).rsplit("/", 1)[0]
    date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    inner = [
        f"  <cwd>{cwd}</cwd>",
        "  <shell>bash</shell>",
        f"  <current_date>{date}</current_date>",
    ]
    if rng.random() < 0.5:
        inner = [instruction(rng) for _ in range(rng.randint(1, 4))]
    return f"<{tag}>\n" + "\n".join(inner) + f"\n</{tag}>"


def agent_turn(rng: random.Random, size: int) -> tuple[list[dict[str, Any]], list[Any], str]:
    """``(messages, tools, reply)`` of an agent-shaped prompt with about ``size`` lines of
    instructions."""
    kinds = rng.sample(KINDS, rng.randint(1, 3))
    target = kinds[0]
    tools, chosen = [], None
    for k in kinds:
        name, param = rng.choice(k.names), rng.choice(k.params)
        description = rng.choice(k.descriptions)
        tools.append(spec(name, description, schema(rng, [(param, f"The {param}.")])))
        chosen = chosen or (name, param)
    tools += unrelated_tools(rng)
    rng.shuffle(tools)
    assert chosen is not None
    msgs: list[dict[str, Any]] = [{"role": "system", "content": prose(rng, size)}]
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": prose(rng, rng.randint(2, 8))})
    request_kind = rng.random()
    value = target.value(rng)
    request = rng.choice(target.asks).format(v=value)
    if rng.random() < 0.6:
        ctx = context_message(rng)
        if rng.random() < 0.5:
            msgs.append({"role": "user", "content": ctx})
        else:
            request = f"{ctx}\n\n\n{request}"
    if request_kind < 0.2:  # no tool needed
        text, topic = question(rng)
        msgs.append({"role": "user", "content": text})
        return msgs, tools, answer(rng, topic)
    msgs.append({"role": "user", "content": request})
    args = {chosen[1]: value}
    if request_kind < 0.6:
        return msgs, tools, tool_reply(chosen[0], args)
    result = target.result(rng, value)
    call = {"type": "function", "function": {"name": chosen[0], "arguments": args}}
    msgs += [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": result},
    ]
    first = result.strip().splitlines()[-1].split("\t")[-1].strip()
    reply = rng.choice([f"It says: {first}", f"The output is: {first}", f"Done. {first}"])
    return msgs, tools, reply


# What a call's result says when it failed: a command not found, a file missing under the
# working folder (pytest's long temporary folders too), a tool refused. The answer after one
# does not copy it: a long made-up path repeated back is where a small model loops.
FAILURES = (
    "/bin/bash: line 1: {value}: command not found\n",
    "Process exited with code 127\nWall time: 0.0 seconds\nOutput:\n"
    "/bin/bash: line 1: {value}: command not found\n",
    "unable to locate image at `{folder}/{value}`: No such file or directory (os error 2)",
    "Error: {folder}/{value}: No such file or directory\n",
    "<tool_use_error>File does not exist. Current working directory: {folder}</tool_use_error>",
    "Error: <tool_use_error>Error: No such tool available: {name}</tool_use_error>",
    "Exit code 1\n{value}: No such file or directory\n",
)
FAILED_ANSWERS = ("It failed.", "It did not work.")


def failed_turn(rng: CorpusRandom, size: int) -> tuple[list[dict[str, Any]], list[Any], str]:
    """An agent turn whose call failed: its result is an error naming the value, a long
    working folder or the tool, and the answer a short sentence that copies none of it."""
    while True:
        messages, tools, _ = agent_turn(rng, size)
        if messages[-1]["role"] == "tool":
            break
    call = messages[-2]["tool_calls"][0]["function"]
    value = next(iter(call["arguments"].values()))
    folder = temp_folder(rng) + rng.choice(["", "/work", "/project"])
    error = rng.choice(FAILURES).format(value=value, folder=folder, name=call["name"])
    messages[-1] = {"role": "tool", "content": error}
    return messages, tools, rng.choice(FAILED_ANSWERS)


Turn = Callable[[CorpusRandom, int], tuple[list[dict[str, Any]], list[Any], str]]


def turns_corpus(
    turn: Turn,
    render: Any,
    n: int,
    seed: int,
    lines: tuple[int, int],
    depth: int,
    tools: int,
    made_up: float,
) -> list[tuple[str, str]]:
    """``n`` rendered turns of one kind (``turn``: :func:`failed_turn`, :func:`exec_turn`), with
    ``lines`` (min, max) instruction lines, made up as ``agent_corpus`` makes its values."""
    rng = CorpusRandom(seed, made_up, depth=depth, tools=tools, prefixed=True)
    out = []
    for _ in range(n):
        messages, offered, reply = turn(rng, rng.randint(*lines))
        out.append((render(messages, offered), reply + "<|im_end|>"))
    return out


def failed_corpus(render: Any, n: int, seed: int, *args: Any) -> list[tuple[str, str]]:
    """``n`` agent turns whose call failed (:func:`failed_turn`)."""
    return turns_corpus(failed_turn, render, n, seed, *args)


# A command's result as Codex CLI 0.169 hands it to the model (its exec tool's output), and
# the exits a command in a fresh folder meets: the exit code says whether it worked.
EXEC_FAILURES = (
    (127, "/bin/bash: line 1: {program}: command not found"),
    (128, "fatal: not a git repository (or any of the parent directories): .git"),
    (1, "{program}: {word}: No such file or directory"),
    (2, "ls: cannot access '{word}': No such file or directory"),
    (
        129,
        "usage: {program} [<options>] <path>\n\n    -p, --patch    generate patch\n"
        "    -q, --quiet    show nothing",
    ),
)


def exec_output(rng: random.Random, code: int, output: str) -> str:
    """``output`` of a command that exited with ``code``, in Codex's exec result shape."""
    return (
        f"Chunk ID: {rng.getrandbits(24):06x}\nWall time: 0.{rng.randint(0, 9999):04d} seconds\n"
        f"Process exited with code {code}\nOriginal token count: {rng.randint(1, 60)}\n"
        f"Output:\n{output}\n"
    )


def exec_turn(rng: CorpusRandom, size: int) -> tuple[list[dict[str, Any]], list[Any], str]:
    """An agent turn that ran a command, its result in Codex's shape: exit code 0 is answered
    with the output's last line, any other code in a short sentence that copies none of it
    (after ``fatal: not a git repository`` the model said "It says: The 0" from the wall
    time, and looped on the zeros)."""
    while True:
        messages, tools, _ = agent_turn(rng, size)
        if messages[-1]["role"] == "tool":
            call = messages[-2]["tool_calls"][0]["function"]
            if call["name"] in KINDS[0].names:
                break
    cmd = str(next(iter(call["arguments"].values())))
    if rng.random() < 0.5:
        out = cmd[5:] if cmd.startswith("echo ") else " ".join(rng.choice(WORDS) for _ in range(3))
        messages[-1] = {"role": "tool", "content": exec_output(rng, 0, out)}
        return messages, tools, rng.choice([f"It says: {out}", f"The output is: {out}"])
    code, text = rng.choice(EXEC_FAILURES)
    output = text.format(program=cmd.split()[0], word=rng.choice(WORDS + NOUNS))
    messages[-1] = {"role": "tool", "content": exec_output(rng, code, output)}
    return messages, tools, rng.choice(FAILED_ANSWERS)


def exec_corpus(render: Any, n: int, seed: int, *args: Any) -> list[tuple[str, str]]:
    """``n`` agent turns that ran a command (:func:`exec_turn`)."""
    return turns_corpus(exec_turn, render, n, seed, *args)


COPY_ASKS = ("Repeat exactly: {v}", "Say exactly this: {v}", "Copy this: {v}", "Echo back: {v}")


def copy_turn(rng: random.Random) -> tuple[list[dict[str, Any]], list[Any], str]:
    """A request to repeat a value (a path, a command, made-up words): the reply is the value.
    What teaches the model to copy from its context (an induction circuit); with made-up
    values nothing else gives the answer."""
    r = rng.random()
    value = (
        path(rng)
        if r < 0.4
        else command(rng)
        if r < 0.7
        else " ".join(
            made_up_word(rng) or rng.choice(WORDS + NOUNS) for _ in range(rng.randint(1, 4))
        )
    )
    msgs = [{"role": "user", "content": rng.choice(COPY_ASKS).format(v=value)}]
    if rng.random() < 0.5:
        msgs.insert(0, {"role": "system", "content": prose(rng, rng.randint(1, 6))})
    return msgs, [], value


def copy_corpus(
    render: Any, n: int, seed: int, depth: int = 5, prefixed: bool = False
) -> list[tuple[str, str]]:
    """``n`` copy turns alone, their values half made up, paths up to ``depth`` folders deep:
    the first phase of a training run that must learn to copy before anything else
    (``--copy-steps``)."""
    rng = CorpusRandom(seed, made_up=0.5, depth=depth, prefixed=prefixed)
    out = []
    for _ in range(n):
        messages, _, reply = copy_turn(rng)
        out.append((render(messages, None), reply + "<|im_end|>"))
    return out


def agent_corpus(
    render: Any,
    n: int,
    seed: int,
    lines: tuple[int, int],
    copying: float = 0.0,
    depth: int = 5,
    tools: int = 2,
    made_up: float | None = None,
) -> list[tuple[str, str]]:
    """``n`` (prompt, reply) pairs of agent turns with ``lines`` (min, max) instruction lines.
    With ``copying`` > 0, that share of them are copy turns and as much of the values are
    made up (:class:`CorpusRandom`, as ``depth`` and ``tools``), or ``made_up`` of them, some
    with a real word in front; 0 gives the corpus as it was before the option."""
    share = copying if made_up is None else made_up
    rng: random.Random = (
        CorpusRandom(seed, share, depth=depth, tools=tools, prefixed=made_up is not None)
        if copying
        else random.Random(seed)
    )
    out = []
    for _ in range(n):
        if copying and rng.random() < copying:
            messages, offered, reply = copy_turn(rng)
        else:
            messages, offered, reply = agent_turn(rng, rng.randint(*lines))
        out.append((render(messages, offered or None), reply + "<|im_end|>"))
    return out


if __name__ == "__main__":
    from modelkit.chat_template import CHAT_TEMPLATE
    from modelkit.demo.template import renderer

    for p, r in agent_corpus(renderer(CHAT_TEMPLATE), 3, 5, (5, 20)):
        print(p + r, "\n=========")
    print(json.dumps(KINDS[0].names))
