"""How far the demo model's deciding tokens lead: the margin of the top logit over the
runner-up where a turn is decided.

Another CPU kind runs other int4 kernels, and logits move by up to about 1.2 between kernel paths
(docs/prefix-sharing.md): a token that wins by less than that on one machine may lose on the
next. The tests and the documented examples rest on the demo's turns at three kinds of token:

- ``quote``: the closing quote of each string argument of a ``<tool_call>``, where a copied
  value stops (``echo hello`` and not ``echo hello.`` and prose after it);
- ``close``: every token from the last argument's end to the end of ``</tool_call>``;
- ``end``: ``<|im_end|>``, where the turn ends.

:func:`margins` decodes a prompt greedily through ``og.Generator``, reading the logits before
each token, and reports the margin at each such token (a call that never closes or a turn that
never ends within the room is reported as missing, which fails any bound). :data:`CASES` are the
turns the tests and the docs decide on, in the shapes the agent CLIs send (their prompts are
not copied: the instructions are the corpus's own, modelkit/demo/agent_values.py; the tools are
the CLIs' names and required parameters, all the demo's template shows of them).

    python -m modelkit.demo.margins models/demo-llama
"""

from __future__ import annotations

import argparse
import json
import random
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from modelkit.demo.agent_corpus import FAILED_ANSWERS
from modelkit.demo.agent_values import prose
from modelkit.demo.template import renderer

BOUND = 2.0  # the least lead a deciding token must have (issue: well above the ~1.2 of kernels)
ROOM = 96  # new tokens a case is given
OPEN, CLOSE = "<tool_call>", "</tool_call>"


def tool(name: str, *required: str) -> dict[str, Any]:
    """A function tool whose required parameters are strings (the template shows only names)."""
    properties = {p: {"type": "string", "description": f"The {p}."} for p in required}
    schema = {"type": "object", "properties": properties, "required": list(required)}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


# The tools Codex CLI 0.169.0 and Claude Code 2.1.197 offer, as the demo's template lists them.
CODEX_TOOLS = [
    tool("exec_command", "cmd"), tool("write_stdin", "session_id"),
    tool("request_user_input", "questions"), tool("view_image", "path"),
    tool("close_agent", "target"), tool("resume_agent", "id"), tool("send_input", "target"),
    tool("spawn_agent"), tool("wait_agent", "targets"), tool("get_goal"),
    tool("create_goal", "objective"), tool("update_goal", "status"),
]  # fmt: skip
CLAUDE_TOOLS = [
    tool("Agent", "description", "prompt"), tool("Bash", "command"),
    tool("CronCreate", "cron", "prompt"), tool("CronDelete", "id"), tool("CronList"),
    tool("DesignSync", "method"), tool("Edit", "file_path", "old_string", "new_string"),
    tool("EnterWorktree"), tool("ExitWorktree", "action"),
    tool("NotebookEdit", "notebook_path", "new_source"), tool("Read", "file_path"),
    tool("ReportFindings", "findings"), tool("ScheduleWakeup", "delaySeconds", "reason", "prompt"),
    tool("SendMessage", "to", "message"), tool("Skill", "skill"),
    tool("TaskCreate", "subject", "description"), tool("TaskGet", "taskId"), tool("TaskList"),
    tool("TaskOutput", "task_id", "block", "timeout"), tool("TaskStop"),
    tool("TaskUpdate", "taskId"), tool("WebFetch", "url", "prompt"), tool("WebSearch", "query"),
    tool("Workflow"), tool("Write", "file_path", "content"),
]  # fmt: skip
WEATHER = tool("get_weather", "city")
SHELL = tool("shell", "command")


def codex_messages(request: str, seed: int) -> list[dict[str, Any]]:
    """Codex's shape: instructions, an environment block as a user message, the request."""
    context = (
        "<environment_context>\n  <cwd>/tmp/tmpq7x2k9ab/work</cwd>\n  <shell>bash</shell>\n"
        "  <current_date>2026-11-29</current_date>\n</environment_context>"
    )
    return [
        {"role": "system", "content": prose(random.Random(seed), 120)},
        {"role": "user", "content": context},
        {"role": "user", "content": request},
    ]


def claude_messages(request: str, seed: int) -> list[dict[str, Any]]:
    """Claude Code's shape: instructions, then a reminder block before the request."""
    reminder = (
        "<system-reminder>\nAs you answer the user's questions, you can use the following "
        "context:\n# currentDate\nToday's date is 2026-11-29.\n</system-reminder>\n\n\n"
    )
    return [
        {"role": "system", "content": prose(random.Random(seed), 120)},
        {"role": "user", "content": reminder + request},
    ]


def after_call(
    messages: list[dict[str, Any]], name: str, arguments: dict[str, str], result: str
) -> list[dict[str, Any]]:
    """``messages`` followed by the call and its result: the turn that answers with it."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    call = {"id": "call_1", "type": "function", "function": function}
    return [
        *messages,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    ]


@dataclass(frozen=True)
class Case:
    """A prompt the tests or the docs decide on, and the call it must write, if any."""

    name: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    # The call the answer must be, as ``(tool, arguments)``: fed token by token (its margins
    # are the right token's lead over the best other); None: the greedy answer, whatever it is.
    call: tuple[str, dict[str, str]] | None = None
    # The greedy answers the case allows, where what it says matters (after a failed command:
    # a short sentence, not text copied from the result's header); empty: any.
    answers: tuple[str, ...] = ()

    def expected(self) -> str | None:
        if self.call is None:
            return None
        name, arguments = self.call
        return f"{OPEN}\n{json.dumps({'name': name, 'arguments': arguments})}\n{CLOSE}"


def codex_exec(code: int, output: str) -> str:
    """A command's result as Codex CLI 0.169 gives it to the model."""
    return (
        f"Chunk ID: 4e1c2a\nWall time: 0.0000 seconds\nProcess exited with code {code}\n"
        f"Original token count: {len(output) // 4 + 1}\nOutput:\n{output}\n"
    )


ECHO = codex_messages("Run the command echo hello.", 11)
SAY_HELLO = codex_messages("Say hello.", 12)
NOTES = "/tmp/tmpk3j9x2ab/notes.txt"
READ = claude_messages(f"Read the file {NOTES} and tell me what it says.", 13)
CASES = [
    # README's curls and the playground's first message; tests/routes/openai/test_demo_model.py
    Case("readme: Hello!", [{"role": "user", "content": "Hello!"}]),
    Case(
        "chat: Tell me about the river.", [{"role": "user", "content": "Tell me about the river."}]
    ),
    Case(
        "tools: weather",
        [{"role": "user", "content": "What is the weather in Paris?"}],
        [WEATHER, SHELL],
        ("get_weather", {"city": "Paris"}),
    ),
    # tests/test_agent_clis.py: Codex CLI
    Case("codex: Say hello.", SAY_HELLO, CODEX_TOOLS),
    Case(
        "codex: Run the command echo hello.",
        ECHO,
        CODEX_TOOLS,
        ("exec_command", {"cmd": "echo hello"}),
    ),
    Case(
        "codex: after echo hello",
        after_call(ECHO, "exec_command", {"cmd": "echo hello"}, codex_exec(0, "hello")),
        CODEX_TOOLS,
        answers=("It says: hello", "The output is: hello"),
    ),
    # "Say hello." under other kernels: Codex's demo sometimes runs a command first
    Case(
        "codex: after git status",
        after_call(
            SAY_HELLO,
            "exec_command",
            {"cmd": "git status"},
            codex_exec(128, "fatal: not a git repository (or any of the parent directories): .git"),
        ),
        CODEX_TOOLS,
        answers=FAILED_ANSWERS,
    ),  # fmt: skip
    Case(
        "codex: after a command not found",
        after_call(
            SAY_HELLO,
            "exec_command",
            {"cmd": "bsw"},
            codex_exec(127, "/bin/bash: line 1: bsw: command not found"),
        ),
        CODEX_TOOLS,
        answers=FAILED_ANSWERS,
    ),  # fmt: skip
    Case(
        "codex: after a failed call",
        after_call(
            SAY_HELLO,
            "view_image",
            {"path": "project/portmissncted.py"},
            "unable to locate image at `/tmp/pytest-of-root/pytest-86/"
            "test_codex_exec_answers_other_0/work/project/portmissncted.py`: No such file or "
            "directory (os error 2)",
        ),
        CODEX_TOOLS,
        answers=FAILED_ANSWERS,
    ),
    # tests/test_agent_clis.py: Claude Code
    Case("claude: Say hello.", claude_messages("Say hello.", 14), CLAUDE_TOOLS),
    Case(
        "claude: Read the file", READ, [tool("Read", "file_path")], ("Read", {"file_path": NOTES})
    ),
    Case(
        "claude: after Read",
        after_call(READ, "Read", {"file_path": NOTES}, "     1\tThe secret word is avocado.\n"),
        [tool("Read", "file_path")],
    ),
]


@dataclass(frozen=True)
class Decision:
    kind: str  # quote, close, end
    margin: float  # top logit minus the runner-up's; -inf where the token never came
    text: str  # the token chosen (or what was missing)


@dataclass
class Outcome:
    case: str
    text: str  # the greedy answer
    decisions: list[Decision]

    @property
    def least(self) -> float:
        return min((d.margin for d in self.decisions), default=float("inf"))


def decode(
    model: Any, ids: list[int], room: int, window: int, forced: list[int] | None = None
) -> list[tuple[int, float]]:
    """New tokens after ``ids``, each with its lead read from the logits before it: greedy
    until the end token or ``room`` of them (the lead over the runner-up), or ``forced`` fed one
    by one (the forced token's lead over the best other token: negative where another wins)."""
    import numpy as np
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=max(len(ids) + room, window), do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    out: list[tuple[int, float]] = []
    while not gen.is_done() and len(out) < (room if forced is None else len(forced)):
        logits = np.asarray(gen.get_logits(), dtype=np.float32).reshape(-1)
        if forced is None:
            second, first = np.partition(logits, -2)[-2:]
            gen.generate_next_token()
            out.append((int(gen.get_next_tokens()[0]), float(first - second)))
            continue
        token = forced[len(out)]
        others = np.delete(logits, token)
        out.append((token, float(logits[token] - others.max())))
        gen.append_tokens([token])
    return out


def deciding(pieces: list[str], ended: int | None) -> list[tuple[str, int]]:
    """The deciding tokens of an answer whose tokens' texts are ``pieces`` (``ended``: the index
    of its end token, if it has one): ``(kind, index)`` pairs, ``index`` -1 where the token
    never came (a call that does not close, a turn that does not end)."""
    text = "".join(pieces)
    ends = list(accumulate(len(p) for p in pieces))

    def step_at(char: int) -> int:  # the token that wrote character ``char``
        return bisect_right(ends, char)

    out: list[tuple[str, int]] = []
    at = text.find(OPEN)
    while at >= 0:
        body = at + len(OPEN)
        closing = text.find(CLOSE, body)
        quotes = value_quotes(text[body : closing if closing >= 0 else len(text)])
        out += [("quote", step_at(body + q)) for q in quotes]
        if closing < 0 or not quotes:
            out.append(("close", -1))
            break
        first, last = step_at(body + quotes[-1]) + 1, step_at(closing + len(CLOSE) - 1)
        out += [("close", i) for i in range(first, last + 1)]
        at = text.find(OPEN, closing)
    out.append(("end", -1 if ended is None else ended))
    return out


def decisions(pieces: list[str], steps: list[tuple[int, float]], eos: int) -> list[Decision]:
    """The margins at the deciding tokens of an answer (:func:`deciding`)."""
    ended = next((i for i, (token, _) in enumerate(steps) if token == eos), None)
    return [
        Decision(kind, steps[i][1], pieces[i] or "<|im_end|>")
        if i >= 0
        else Decision(kind, float("-inf"), "missing")
        for kind, i in deciding(pieces, ended)
    ]


def value_quotes(body: str) -> list[int]:
    """Where the string values after ``"arguments"`` close in a call's JSON text (a key's
    closing quote is followed by ``:``, a value's is not)."""
    start = body.find('"arguments"')
    if start < 0:
        return []
    out, i, opened = [], start + len('"arguments"'), -1
    while i < len(body):
        c = body[i]
        if opened >= 0:
            if c == "\\":
                i += 1
            elif c == '"':
                if not body[i + 1 :].lstrip().startswith(":"):
                    out.append(i)
                opened = -1
        elif c == '"':
            opened = i
        i += 1
    return out


def margins(folder: Path, cases: list[Case] = CASES, room: int = ROOM) -> list[Outcome]:
    """Each case decoded greedily on the model in ``folder``, with its deciding tokens."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tok = og.Tokenizer(model)
    config = json.loads((folder / "genai_config.json").read_text())["model"]
    eos = config["eos_token_id"]
    eos = eos[0] if isinstance(eos, list) else int(eos)
    window = int((config["decoder"].get("sliding_window") or {}).get("window_size", 0))
    render = renderer((folder / "chat_template.jinja").read_text())
    out = []
    for case in cases:
        ids = list(tok.encode(render(case.messages, case.tools or None)))
        expected = case.expected()
        forced = None if expected is None else [*tok.encode(expected), eos]
        steps = decode(model, ids, room, window, forced)
        pieces = [tok.decode([t]) if t != eos else "" for t, _ in steps]
        out.append(Outcome(case.name, "".join(pieces), decisions(pieces, steps, eos)))
    return out


def table(outcomes: list[Outcome]) -> str:
    """A Markdown table: each case's least margin per kind of deciding token, and its answer."""
    rows = ["| case | quote | close | end | answer |", "|---|---|---|---|---|"]
    for o in outcomes:
        least = {
            kind: min((d.margin for d in o.decisions if d.kind == kind), default=None)
            for kind in ("quote", "close", "end")
        }
        cells = ["" if m is None else f"{m:.2f}" for m in least.values()]
        answer = o.text.replace("\n", "\\n").replace("|", "\\|")[:70]
        rows.append(f"| {o.case} | {' | '.join(cells)} | `{answer}` |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("folder", type=Path, nargs="?", default=Path("models/demo-llama"))
    args = ap.parse_args()
    outcomes = margins(args.folder)
    print(table(outcomes))
    low = [o.case for o in outcomes if o.least < BOUND]
    print(f"\nbelow {BOUND}: {low or 'none'}")
    wrong = [o.case for o, c in zip(outcomes, CASES, strict=True) if not answered(o, c)]
    print(f"answers not allowed: {wrong or 'none'}")


def answered(outcome: Outcome, case: Case) -> bool:
    """Whether the greedy answer is one the case allows."""
    return not case.answers or outcome.text.strip() in case.answers


if __name__ == "__main__":
    main()
