"""The lazy tool-call grammar of ``tool_choice="auto"`` with a tool whose arguments' schema
llguidance will not compile as it stands: that tool alone is relaxed, and the grammar still
holds every call to the offered tools.

The shape is zod 4's ``z.record(z.string(), ...)``: an object with ``propertyNames``, a keyword
llguidance does not implement, which agents' tools carry (a tool's free-form metadata)."""

from __future__ import annotations

import logging
from typing import Any

import llguidance
import pytest

from backends.chat.formats import ChatFormat
from backends.chat.parsers import get_tool_parser
from backends.core.planning import apply_tools
from backends.core.request import ChatPrompt, GenerationRequest
from config.settings import DEMO_MODEL_DIR

pytestmark = pytest.mark.unit

HERMES = ChatFormat(tools=get_tool_parser("hermes"))
ASK = [{"role": "user", "content": "Note that the tide is high."}]


def tool(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": required}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def record(name: str) -> dict[str, Any]:
    """A tool with a text and a free-form label map keyed by strings (zod's record)."""
    labels = {"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": {}}
    return tool(name, {"text": {"type": "string"}, "labels": labels}, ["text"])


WEATHER = tool("get_weather", {"city": {"type": "string"}}, ["city"])


def call_grammar(tools: list[dict[str, Any]]) -> str:
    request = GenerationRequest(ChatPrompt(ASK, tools=tools), tool_choice="auto")
    call = apply_tools(request, HERMES).sampling.call_grammar
    assert call is not None, "the lazy tool-call grammar was left out"
    return call.grammar


@pytest.fixture(scope="module")
def tokenizer() -> llguidance.LLTokenizer:
    return llguidance.LLTokenizer(str(DEMO_MODEL_DIR / "tokenizer.json"))


def accepts(lark: str, tokenizer: llguidance.LLTokenizer, name: str, arguments: str) -> bool:
    matcher = llguidance.LLMatcher(tokenizer, llguidance.grammar_from("lark", lark), log_level=0)
    text = f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'
    return matcher.consume_tokens(tokenizer.tokenize_str(text)) and matcher.is_accepting()


def test_a_keyword_llguidance_does_not_implement_is_dropped_for_its_tool_alone(
    tokenizer: llguidance.LLTokenizer,
) -> None:
    grammar = call_grammar([WEATHER, record("save_note")])
    assert accepts(grammar, tokenizer, "get_weather", '{"city": "Brest"}')
    assert accepts(grammar, tokenizer, "save_note", '{"text": "high", "labels": {"sea": 1}}')
    assert not accepts(grammar, tokenizer, "read_file", '{"path": "notes.txt"}')  # not offered
    assert not accepts(grammar, tokenizer, "get_weather", '{"town": "Brest"}')
    assert not accepts(grammar, tokenizer, "save_note", '{"labels": {}}')  # text is required


def test_a_schema_llguidance_refuses_even_so_leaves_that_tool_any_object(
    tokenizer: llguidance.LLTokenizer,
) -> None:
    lookahead = tool("tag", {"tag": {"type": "string", "pattern": "^(?!x)"}}, ["tag"])
    grammar = call_grammar([WEATHER, lookahead])
    assert accepts(grammar, tokenizer, "tag", '{"anything": [1]}')
    assert not accepts(grammar, tokenizer, "get_weather", '{"town": "Brest"}')
    assert not accepts(grammar, tokenizer, "untag", "{}")


def test_what_was_relaxed_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="backends.core.grammar_check"):
        call_grammar([WEATHER, record("file_note")])
    relaxed = [r.getMessage() for r in caplog.records if "file_note" in r.getMessage()]
    assert len(relaxed) == 1 and "propertyNames" in relaxed[0], caplog.text
    assert "get_weather" not in caplog.text
