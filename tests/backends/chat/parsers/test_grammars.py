"""Forced calls: every grammar compiles in llguidance, accepts the calls it should and nothing
else, and whatever a model generates under it parses back into valid calls.

Two tokenizers: the demo model's (no marker is a token, so markers are spelled as text) and a
copy of it where every marker is a special token (as in the real vocabularies, where the grammar
must name the token itself; it also switches Mistral to its v11 form, since ``[ARGS]`` exists).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import llguidance
import numpy as np
import pytest

from backends.chat.parsers import ToolSpec, get_tool_parser, tool_parser_names, tool_specs
from config.settings import DEMO_MODEL_DIR

pytestmark = pytest.mark.unit

MARKERS = [
    "<tool_call>",
    "</tool_call>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|tool_call|>",
    "<|/tool_call|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
]

WEATHER = ToolSpec(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
)
LIGHT = ToolSpec(
    "set_light",
    {
        "type": "object",
        "properties": {"on": {"type": "boolean"}},
        "required": ["on"],
        "additionalProperties": False,
    },
)
PING = ToolSpec("ping")  # no parameters: any object
TOOLS = [WEATHER, LIGHT, PING]

# Tools whose arguments have few values, so random generation ends quickly.
CITY = ToolSpec(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"enum": ["Paris", "Tōkyō"]},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
)
NO_ARGS = ToolSpec("ping", {"type": "object", "properties": {}, "additionalProperties": False})
SMALL_TOOLS = [CITY, LIGHT, NO_ARGS]

CHOICES: dict[str, dict[str, Any]] = {
    "required": {"tool_name": None, "parallel": True},
    "required_one": {"tool_name": None, "parallel": False},
    "named": {"tool_name": "set_light", "parallel": True},
}


class Vocab:
    """A tokenizer and the special tokens the parsers are told about."""

    def __init__(self, tokenizer: llguidance.LLTokenizer, special: dict[str, int]) -> None:
        self.tokenizer = tokenizer
        self.special = special


def with_marker_tokens(path: Path) -> dict[str, int]:
    """Write a copy of the demo tokenizer where every marker is a special token."""
    spec = json.loads((DEMO_MODEL_DIR / "tokenizer.json").read_text())
    ids: dict[str, int] = {}
    for marker in MARKERS:
        token_id = len(spec["model"]["vocab"])
        spec["model"]["vocab"][marker] = token_id
        spec["added_tokens"].append(
            {
                "id": token_id,
                "content": marker,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
        ids[marker] = token_id
    path.write_text(json.dumps(spec))
    return ids


@pytest.fixture(scope="module", params=["text_markers", "token_markers"])
def vocab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Vocab:
    if request.param == "text_markers":
        return Vocab(llguidance.LLTokenizer(str(DEMO_MODEL_DIR / "tokenizer.json")), {})
    path = tmp_path_factory.mktemp("vocab") / "tokenizer.json"
    special = with_marker_tokens(path)
    return Vocab(llguidance.LLTokenizer(str(path)), special)


def compile_grammar(lark: str, vocab: Vocab) -> str:
    grammar = llguidance.LLMatcher.grammar_from_lark(lark)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(
        grammar, vocab.tokenizer
    )
    assert not is_error, "\n".join(messages) + "\n" + lark
    return grammar


def accepts(grammar: str, vocab: Vocab, text: str) -> bool:
    matcher = llguidance.LLMatcher(vocab.tokenizer, grammar)
    tokens = vocab.tokenizer.tokenize_str(text, parse_special=True)
    return matcher.consume_tokens(tokens) and matcher.is_accepting()


# How each format writes calls, from the model documentation (name, arguments JSON).
Calls = Sequence[tuple[str, str]]


def call_object(name: str, arguments: str, key: str = "arguments") -> str:
    return f'{{"name": {json.dumps(name, ensure_ascii=False)}, "{key}": {arguments}}}'


def hermes_text(calls: Calls) -> str:
    return "\n".join(f"<tool_call>\n{call_object(n, a)}\n</tool_call>" for n, a in calls)


def llama_text(calls: Calls) -> str:
    return "; ".join(call_object(n, a, "parameters") for n, a in calls)


def mistral_text(calls: Calls, v11: bool) -> str:
    if v11:
        return "".join(f"[TOOL_CALLS]{n}[ARGS]{a}" for n, a in calls)
    return "[TOOL_CALLS][" + ", ".join(call_object(n, a) for n, a in calls) + "]"


def phi_text(calls: Calls) -> str:
    listed = ", ".join(call_object(n, a) for n, a in calls)
    return f"<|tool_call|>[{listed}]<|/tool_call|>"


def deepseek_text(calls: Calls) -> str:
    body = "\n".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{a}\n```<｜tool▁call▁end｜>"
        for n, a in calls
    )
    return f"<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>"


def renderer(name: str, vocab: Vocab) -> Callable[[Calls], str]:
    if name == "deepseek_v3":
        return deepseek_text
    if name == "hermes":
        return hermes_text
    if name == "llama3_json":
        return llama_text
    if name == "mistral":
        v11 = "[ARGS]" in vocab.special
        return lambda calls: mistral_text(calls, v11)
    return phi_text


# llguidance's JSON writes non-ASCII characters as they are, not as \u escapes.
PARIS = (
    "get_weather",
    json.dumps({"city": 'Paris "15e" – Île', "unit": "celsius"}, ensure_ascii=False),
)
LIGHT_ON = ("set_light", '{"on": true}')
PING_CALL = ("ping", '{"anything": [1, {"goes": null}]}')


@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("name", tool_parser_names())
def test_grammar_is_valid_for_llguidance(name: str, choice: str, vocab: Vocab) -> None:
    parser = get_tool_parser(name, vocab.special)
    compile_grammar(parser.forced_call_grammar(TOOLS, **CHOICES[choice]), vocab)


@pytest.mark.parametrize("name", tool_parser_names())
def test_required_accepts_one_or_more_valid_calls_only(name: str, vocab: Vocab) -> None:
    parser = get_tool_parser(name, vocab.special)
    grammar = compile_grammar(parser.forced_call_grammar(TOOLS), vocab)
    render = renderer(name, vocab)
    for calls in ([PARIS], [LIGHT_ON, PARIS], [PING_CALL, LIGHT_ON, LIGHT_ON]):
        text = render(calls)
        assert accepts(grammar, vocab, text), text
        parsed = parser.extract(text)
        assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [
            (n, json.loads(a)) for n, a in calls
        ]
    rejected = [
        render([("get_weather", '{"city": "Paris", "unit": "kelvin"}')]),  # not in the enum
        render([("get_weather", '{"city": "Paris"}')]),  # a required argument missing
        render([("set_light", '{"on": true, "dim": 3}')]),  # no additional properties
        render([("open_door", "{}")]),  # no such tool
        render([("set_light", '{"on":true}')]),  # not the calls' JSON style
        "I cannot call a tool.",
        "",
    ]
    for text in rejected:
        assert not accepts(grammar, vocab, text), text


@pytest.mark.parametrize("name", tool_parser_names())
def test_required_without_parallel_accepts_exactly_one_call(name: str, vocab: Vocab) -> None:
    parser = get_tool_parser(name, vocab.special)
    grammar = compile_grammar(parser.forced_call_grammar(TOOLS, parallel=False), vocab)
    render = renderer(name, vocab)
    assert accepts(grammar, vocab, render([LIGHT_ON]))
    assert not accepts(grammar, vocab, render([LIGHT_ON, PARIS]))


@pytest.mark.parametrize("name", tool_parser_names())
def test_named_tool_accepts_exactly_one_call_to_it(name: str, vocab: Vocab) -> None:
    parser = get_tool_parser(name, vocab.special)
    grammar = compile_grammar(parser.forced_call_grammar(TOOLS, tool_name="set_light"), vocab)
    render = renderer(name, vocab)
    assert accepts(grammar, vocab, render([LIGHT_ON]))
    assert not accepts(grammar, vocab, render([PARIS]))
    assert not accepts(grammar, vocab, render([LIGHT_ON, LIGHT_ON]))


def generate(grammar: str, vocab: Vocab, rng: random.Random, max_tokens: int = 3000) -> str:
    """What a model constrained by ``grammar`` could write: random tokens the grammar allows,
    stopping at random once it may stop."""
    tokenizer = vocab.tokenizer
    matcher = llguidance.LLMatcher(tokenizer, grammar)
    generated: list[int] = []
    for _ in range(max_tokens):
        if matcher.is_stopped() or (matcher.is_accepting() and rng.random() < 0.5):
            break
        bits = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), np.uint8), bitorder="little")
        allowed = [int(t) for t in np.flatnonzero(bits[: tokenizer.vocab_size])]
        allowed = [t for t in allowed if t not in tokenizer.eos_tokens]
        assert allowed, matcher.get_error()
        token = rng.choice(allowed)
        assert matcher.consume_token(token), matcher.get_error()
        generated.append(token)
    assert matcher.is_accepting(), tokenizer.decode_str(generated)
    return tokenizer.decode_str(generated)


def valid_arguments(name: str, arguments: dict[str, Any]) -> bool:
    if name == "get_weather":
        return arguments.keys() == {"city", "unit"} and arguments["city"] in ("Paris", "Tōkyō")
    if name == "set_light":
        return arguments.keys() == {"on"} and isinstance(arguments["on"], bool)
    return name == "ping" and arguments == {}


@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("name", tool_parser_names())
def test_what_a_constrained_model_writes_parses_back(name: str, choice: str, vocab: Vocab) -> None:
    parser = get_tool_parser(name, vocab.special)
    options = CHOICES[choice]
    grammar = compile_grammar(parser.forced_call_grammar(SMALL_TOOLS, **options), vocab)
    rng = random.Random(f"{name}/{choice}")
    counts = set()
    for _ in range(8):
        text = generate(grammar, vocab, rng)
        parsed = parser.extract(text)
        assert parsed.content == "", text
        assert parsed.calls, text
        for call in parsed.calls:
            assert valid_arguments(call.name, json.loads(call.arguments)), text
        if options["tool_name"] is not None:
            assert [c.name for c in parsed.calls] == [options["tool_name"]]
        elif not options["parallel"]:
            assert len(parsed.calls) == 1
        counts.add(len(parsed.calls))
    if choice == "required":
        assert max(counts) > 1  # parallel calls were generated too


@pytest.mark.parametrize("name", tool_parser_names())
def test_unusual_tool_names_parse_back(name: str) -> None:
    vocab = Vocab(llguidance.LLTokenizer(str(DEMO_MODEL_DIR / "tokenizer.json")), {})
    odd = ToolSpec('say "hi" – ü', {"type": "object", "properties": {}})
    parser = get_tool_parser(name)
    grammar = compile_grammar(parser.forced_call_grammar([odd]), vocab)
    text = renderer(name, vocab)([(odd.name, "{}")])
    assert accepts(grammar, vocab, text)
    assert [c.name for c in parser.extract(text).calls] == [odd.name]


def test_grammar_refuses_what_it_cannot_force() -> None:
    parser = get_tool_parser("hermes")
    with pytest.raises(ValueError, match="at least one tool"):
        parser.forced_call_grammar([])
    with pytest.raises(ValueError, match="No tool is named"):
        parser.forced_call_grammar(TOOLS, tool_name="open_door")
    with pytest.raises(ValueError, match="JSON object"):
        parser.forced_call_grammar([ToolSpec("f", {"type": "string"})])
    v11 = get_tool_parser("mistral", {"[TOOL_CALLS]": 5, "[ARGS]": 6})
    with pytest.raises(ValueError, match="v11"):
        v11.forced_call_grammar([ToolSpec("has space")])


def test_openai_tools_become_specs() -> None:
    tools: list[dict[str, Any]] = [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
        {"name": "g", "description": "bare function object"},
    ]
    assert tool_specs(tools) == [ToolSpec("f", {"type": "object"}), ToolSpec("g", None)]


@pytest.mark.parametrize("name", tool_parser_names())
def test_declared_properties_are_the_only_ones_unless_the_schema_opens_more(
    name: str, vocab: Vocab
) -> None:
    """LangChain's schemas leave ``additionalProperties`` out; an untrained model then wrote
    invented keys until max_tokens. Unsaid means none, as in OpenAI's strict mode."""
    unsaid = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}},
        },
        "required": ["city"],
    }
    opened = {**unsaid, "additionalProperties": True}
    render = renderer(name, vocab)
    extra = ("get_weather", '{"city": "Paris", "zone": "x"}')
    nested = ("get_weather", '{"city": "Paris", "where": {"lat": 1, "lon": 2}}')
    fine = ("get_weather", '{"city": "Paris", "where": {"lat": 1}}')
    for schema, allows_extra in ((unsaid, False), (opened, True)):
        parser = get_tool_parser(name, vocab.special)
        grammar = compile_grammar(
            parser.forced_call_grammar([ToolSpec("get_weather", schema)], parallel=False), vocab
        )
        assert accepts(grammar, vocab, render([fine]))
        assert accepts(grammar, vocab, render([extra])) == allows_extra
        assert not accepts(grammar, vocab, render([nested]))  # the nested object said nothing


@pytest.mark.parametrize("name", tool_parser_names())
def test_the_lazy_grammar_holds_calls_from_their_marker(name: str, vocab: Vocab) -> None:
    """``tool_choice="auto"``: the forced-call grammar from where the format's marker begins
    (text before it may share the marker's first token)."""
    parser = get_tool_parser(name, vocab.special)
    call = parser.lazy_call_grammar(TOOLS)
    if name == "llama3_json":
        assert call is None  # its calls open with plain JSON: there is no marker to wait for
        return
    assert call is not None and call.trigger == parser.markers[0]
    assert call.trigger_token == vocab.special.get(call.trigger)
    grammar = compile_grammar(call.grammar, vocab)
    render = renderer(name, vocab)
    for calls in ([PARIS], [LIGHT_ON, PARIS]):
        assert accepts(grammar, vocab, render(calls)), render(calls)
        assert accepts(grammar, vocab, "ok " + render(calls))
    assert not accepts(grammar, vocab, render([("open_door", "{}")]))  # not offered
    assert not accepts(grammar, vocab, render([("set_light", '{"on": true, "dim": 3}')]))
    single = parser.lazy_call_grammar(TOOLS, parallel=False)
    assert single is not None
    assert not accepts(compile_grammar(single.grammar, vocab), vocab, render([LIGHT_ON, PARIS]))
