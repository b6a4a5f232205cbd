"""The demo model's training corpus: generated, seeded, small.

Chat turns as the model's own ChatML template renders them, each an ``(prompt, reply)`` pair of
texts: the prompt ends with ``<|im_start|>assistant\\n``, the reply is what the model must write,
ending with ``<|im_end|>``. Four kinds of turn:

- a plain chat (optional system prompt, earlier turns, a question or a long message): an answer
  of one to three short sentences made of the corpus's words;
- tools offered in the system prompt (rendered by the template with ``tools``) and a request for
  what one of them does: one hermes call, ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n
  </tool_call>``, its name copied from the offered tool and its values from the request;
- tools offered but a request none of them serves: a plain answer;
- a tool's result given back: a plain answer that uses it.

Same seed, same corpus.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NOUNS = (
    "model server token request stream answer question cache prompt reply chat user engine "
    "thread queue batch word line text code data value number river mountain city house road "
    "tree bird fish water fire earth wind light day night morning evening summer winter spring "
    "music book story paper sun moon star garden window door table friend teacher school"
).split()
ADJECTIVES = (
    "small large fast slow good new old red blue green dark bright quiet warm cold long short "
    "simple clear happy calm busy"
).split()
VERBS = (  # (base, third person)
    "read reads|write writes|build builds|run runs|open opens|close closes|start starts|"
    "stop stops|learn learns|teach teaches|find finds|keep keeps|send sends|hold holds|"
    "see sees|make makes|follow follows|answer answers"
).split("|")
PLACES = (
    "in the city|by the river|on the mountain|at the house|near the road|in the garden|at night|"
    "in the morning|in the evening|in the summer|in the winter|with the server|on the table"
).split("|")
CITIES = (
    "Paris Rome Oslo London Berlin Madrid Lisbon Vienna Prague Dublin Athens Cairo Tokyo Seoul "
    "Lima Quito Sydney Boston Denver Chicago Toronto Dakar Nairobi Delhi Hanoi Bergen Porto"
).split()
ZONES = "UTC CET EST PST JST GMT IST".split()
EXTENSIONS = "txt md py json toml csv log".split()
COMMANDS = (
    "ls|pwd|date|whoami|ls -la|git status|git log|cat notes.txt|echo hello|python --version|"
    "uname -a|df -h|make test|pytest -q"
).split("|")
NUMBERS = "one two three four five six seven".split()
SYSTEMS = (
    "You are a helpful assistant.",
    "You are a small demo model. Answer briefly.",
    "You are a coding agent. Use the tools when they help.",
    "Answer the user in one or two sentences.",
)


def _verb(rng: random.Random) -> tuple[str, str]:
    base, third = rng.choice(VERBS).split()
    return base, third


def sentence(rng: random.Random, topic: str | None = None) -> str:
    """One short sentence from the corpus's words, about ``topic`` when given."""
    noun = topic or rng.choice(NOUNS)
    other = rng.choice(NOUNS)
    adj, adj2 = rng.sample(ADJECTIVES, 2)
    base, third = _verb(rng)
    forms = [
        f"The {adj} {noun} {third} the {other} {rng.choice(PLACES)}.",
        f"The {noun} is {adj} and {adj2}.",
        f"I think the {noun} is {adj} {rng.choice(PLACES)}.",
        f"A {noun} can {base} a {adj} {other}.",
        f"Yes, the {noun} {third} the {other}.",
        f"Every {noun} {third} a {other} {rng.choice(PLACES)}.",
    ]
    return rng.choice(forms)


def answer(rng: random.Random, topic: str | None = None) -> str:
    n = rng.choice((1, 1, 2, 2, 3))
    return " ".join(sentence(rng, topic if i == 0 else None) for i in range(n))


def question(rng: random.Random) -> tuple[str, str | None]:
    """A user message and its topic noun (None: no topic)."""
    noun, adj = rng.choice(NOUNS), rng.choice(ADJECTIVES)
    base, _ = _verb(rng)
    forms: list[tuple[str, str | None]] = [
        (f"Tell me about the {noun}.", noun),
        (f"What is a {noun}?", noun),
        (f"Why is the {noun} {adj}?", noun),
        (f"Can you {base} the {noun}?", noun),
        (f"Write a short story about a {noun}.", noun),
        (f"Say something about the {adj} {noun}.", noun),
        (rng.choice(["Hello!", "Hi", "Hello, who are you?", "Hey there.", "Good morning!"]), None),
        (rng.choice(["Say hello.", "Say this is a test.", "Thank you!", "Thanks.", "Ok"]), None),
        (" ".join(sentence(rng) for _ in range(rng.randint(1, 12))), noun),
    ]
    text, topic = rng.choice(forms)
    if topic is not None and topic not in text.split(" ") and topic + "." not in text:
        topic = None
    return text, topic


@dataclass(frozen=True)
class Tool:
    """A function tool and how a user asks for it: ``ask(rng) -> (request, arguments)``."""

    name: str
    description: str
    params: dict[str, tuple[str, str]]  # name -> (json type, description)
    ask: Callable[[random.Random], tuple[str, dict[str, Any]]]

    def spec(self) -> dict[str, Any]:
        props = {k: {"type": t, "description": d} for k, (t, d) in self.params.items()}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": props, "required": list(props)},
            },
        }


def _file(rng: random.Random) -> str:
    stem = rng.choice(NOUNS + ["notes", "main", "README", "config", "todo"])
    folder = rng.choice(["", "", "src/", "docs/", "tests/", "/tmp/"])
    return f"{folder}{stem}.{rng.choice(EXTENSIONS)}"


def _weather(rng: random.Random) -> tuple[str, dict[str, Any]]:
    city = rng.choice(CITIES)
    if rng.random() < 0.4:
        days = rng.randint(1, 7)
        word = NUMBERS[days - 1] if rng.random() < 0.5 else str(days)
        return f"What is the weather in {city} for {word} days?", {"city": city, "days": days}
    return rng.choice(
        [f"What is the weather in {city}?", f"How is the weather in {city} today?"]
    ), {"city": city}


def _one(param: str, forms: list[str], value: Callable[[random.Random], str]) -> Any:
    def ask(rng: random.Random) -> tuple[str, dict[str, Any]]:
        v = value(rng)
        return rng.choice(forms).format(v=v), {param: v}

    return ask


FIXED_TOOLS = [
    Tool(
        "get_weather",
        "Get the weather in a city.",
        {"city": ("string", "The city."), "days": ("integer", "How many days.")},
        _weather,
    ),
    Tool(
        "get_time",
        "Get the time in a time zone.",
        {"zone": ("string", "The time zone.")},
        _one(
            "zone",
            ["What time is it in {v}?", "Tell me the time in {v}."],
            lambda r: r.choice(ZONES),
        ),
    ),
    Tool(
        "read_file",
        "Read a file.",
        {"path": ("string", "The file path.")},
        _one("path", ["Read the file {v}.", "What is in {v}?", "Show me {v}."], _file),
    ),
    Tool(
        "Read",
        "Reads a file from the local filesystem.",
        {"file_path": ("string", "The absolute path to the file to read")},
        _one(
            "file_path",
            ["Read {v}.", "Read the file {v} and tell me what it says.", "What does {v} say?"],
            _file,
        ),
    ),
    Tool(
        "shell",
        "Runs a shell command and returns its output.",
        {"command": ("string", "The command to run.")},
        _one(
            "command",
            ["Run {v}.", "Run the command {v}.", "Please run `{v}` in the shell."],
            lambda r: r.choice(COMMANDS),
        ),
    ),
    Tool(
        "search",
        "Search the web for a query.",
        {"query": ("string", "What to search for.")},
        _one(
            "query",
            ["Search for {v}.", "Search the web for {v}."],
            lambda r: f"{r.choice(ADJECTIVES)} {r.choice(NOUNS)}",
        ),
    ),
]


def generic_tool(rng: random.Random) -> Tool:
    """A made-up ``verb_noun`` tool of one string argument: the model must copy the name from
    the offered tools and the value from the request, not remember them."""
    base, third = _verb(rng)
    noun = rng.choice(NOUNS)
    param = rng.choice([n for n in NOUNS if n != noun])
    name = rng.choice([f"{base}_{noun}", f"{base}{noun.title()}", f"{noun}_{base}"])

    def value(r: random.Random) -> str:
        return r.choice(
            [r.choice(CITIES), f"the {r.choice(ADJECTIVES)} {r.choice(NOUNS)}", r.choice(NOUNS)]
        )

    forms = [
        f"Please {base} the {noun} for {{v}}.",
        f"{base.title()} the {noun} for {{v}}.",
        f"Can you {base} the {noun} of {{v}}?",
    ]
    return Tool(
        name,
        f"{third.title()} the {noun} for a {param}.",
        {param: ("string", f"The {param}.")},
        _one(param, forms, value),
    )


def tool_reply(name: str, args: dict[str, Any]) -> str:
    call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>\n{call}\n</tool_call>"


def _pick_tools(rng: random.Random) -> list[Tool]:
    tools = []
    for _ in range(rng.choice((1, 1, 2))):
        tools.append(rng.choice(FIXED_TOOLS) if rng.random() < 0.85 else generic_tool(rng))
    unique = {t.name: t for t in tools}
    return list(unique.values())


def history(rng: random.Random) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for _ in range(rng.choice((0, 0, 0, 1, 2))):
        text, topic = question(rng)
        msgs += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": answer(rng, topic)},
        ]
    return msgs


def conversation(
    rng: random.Random,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, str]:
    """``(messages, tools or None, reply)``: the reply answers the last message."""
    kind = rng.random()
    system = [{"role": "system", "content": rng.choice(SYSTEMS)}] if rng.random() < 0.5 else []
    if kind < 0.1:  # copying the user's words: the skill a call's arguments need
        words = f"the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {rng.choice(PLACES)}"
        ask = rng.choice(["Say {v}.", "Repeat after me: {v}.", "Please say {v}."]).format(v=words)
        return [*system, {"role": "user", "content": ask}], None, words.capitalize() + "."
    if kind < 0.3:
        text, topic = question(rng)
        return [*system, *history(rng), {"role": "user", "content": text}], None, answer(rng, topic)
    tools = _pick_tools(rng)
    specs = [t.spec() for t in tools]
    target = rng.choice(tools)
    request, args = target.ask(rng)
    if kind < 0.75:
        msgs = [*system, {"role": "user", "content": request}]
        return msgs, specs, tool_reply(target.name, args)
    if kind < 0.85:
        text, topic = question(rng)
        return [*system, {"role": "user", "content": text}], specs, answer(rng, topic)
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": target.name, "arguments": args},
    }
    result = answer(rng)
    turns: list[dict[str, Any]] = [
        *system,
        {"role": "user", "content": request},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": result},
    ]
    return turns, specs, f"Done. {result}" if rng.random() < 0.5 else result


def corpus(
    render: Callable[[list[dict[str, Any]], Any], str], n: int, seed: int
) -> list[tuple[str, str]]:
    """``n`` (prompt, reply) pairs; ``render(messages, tools)`` is the chat template with the
    generation prompt."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        messages, tools, reply = conversation(rng)
        out.append((render(messages, tools), reply + "<|im_end|>"))
    return out
