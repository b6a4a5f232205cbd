"""Llama 3.x JSON calls: a bare object (maybe after ``<|python_tag|>``), several joined by ``;``."""

from __future__ import annotations

import pytest

from backends.chat.parsers import ParsedOutput, ToolCall, get_tool_parser
from tests.backends.chat.parsers.streaming import splits, streamed

pytestmark = pytest.mark.unit

PARSER = get_tool_parser("llama3_json")

CONDITIONS = '{"location": "San Francisco, CA", "unit": "Fahrenheit"}'
SINGLE = '{"name": "get_current_conditions", "parameters": ' + CONDITIONS + "}"
SINGLE_CALL = [ToolCall("get_current_conditions", CONDITIONS)]
THREE = [
    ToolCall("searchTool", '{"query": "test1"}'),
    ToolCall("getOpenIncidentsTool", "{}"),
    ToolCall("searchTool", '{"query": "test2"}'),
]


def three_calls(separator: str) -> str:
    return separator.join(
        [
            '{"name": "searchTool", "parameters": {"query": "test1"}}',
            '{"name": "getOpenIncidentsTool", "parameters": {}}',
            '{"name": "searchTool", "parameters": {"query": "test2"}}',
        ]
    )


VALID = {
    "single": (SINGLE, ParsedOutput("", SINGLE_CALL)),
    "python_tag": ("<|python_tag|>" + SINGLE, ParsedOutput("", SINGLE_CALL)),
    "leading_newlines": ("\n\n" + SINGLE, ParsedOutput("", SINGLE_CALL)),
    "parallel_semicolon_space": (three_calls("; "), ParsedOutput("", THREE)),
    "parallel_semicolon": (three_calls(";"), ParsedOutput("", THREE)),
    "parallel_spaced_semicolon": (three_calls(" ; "), ParsedOutput("", THREE)),
    "parallel_newline": (three_calls("\n"), ParsedOutput("", THREE)),
    "python_tag_parallel": ("<|python_tag|>" + three_calls("; "), ParsedOutput("", THREE)),
    "arguments_key": (
        '{"name": "searchTool", "arguments": {"query": "test"}}',
        ParsedOutput("", [ToolCall("searchTool", '{"query": "test"}')]),
    ),
    "text_after": (
        SINGLE + " Would you like to know more?",
        ParsedOutput("Would you like to know more?", SINGLE_CALL),
    ),
    "python_tag_after_text": (
        "Let me look that up.<|python_tag|>" + SINGLE,
        ParsedOutput("Let me look that up.", SINGLE_CALL),
    ),
    "deep_nesting_and_brackets_in_strings": (
        '{"name": "complexTool", "parameters": {"query": "test {value} [complex]", '
        '"config": {"database": {"connection": {"pool": {"size": 10}}}}, '
        '"text": "He said \\"Hello {world}\\""}}',
        ParsedOutput(
            "",
            [
                ToolCall(
                    "complexTool",
                    '{"query": "test {value} [complex]", '
                    '"config": {"database": {"connection": {"pool": {"size": 10}}}}, '
                    '"text": "He said \\"Hello {world}\\""}',
                )
            ],
        ),
    ),
    "call_then_json_in_prose": (
        SINGLE + ' The arguments I passed were {"query": "test"}',
        ParsedOutput('The arguments I passed were {"query": "test"}', SINGLE_CALL),
    ),
    # Built-in tools, as Meta's Llama 3.1 model card shows them (and its template writes them).
    "builtin_tool": (
        '<|python_tag|>brave_search.call(query="current weather in Menlo Park, California")',
        ParsedOutput(
            "", [ToolCall("brave_search", '{"query": "current weather in Menlo Park, California"}')]
        ),
    ),
    "builtin_tool_literals": (
        "<|python_tag|>wolfram_alpha.call(query='solve x^2 + 2x = \\'3\\')', n=2, exact=True)",
        ParsedOutput(
            "",
            [
                ToolCall(
                    "wolfram_alpha", '{"query": "solve x^2 + 2x = \'3\')", "n": 2, "exact": true}'
                )
            ],
        ),
    ),
    "builtin_tool_after_text": (
        'Searching.<|python_tag|>brave_search.call(query="ONNX")',
        ParsedOutput("Searching.", [ToolCall("brave_search", '{"query": "ONNX"}')]),
    ),
}

# These stay content, exactly as written.
CONTENT = {
    "plain_text": "The weather in San Francisco is sunny.",
    # Bare JSON counts only at the start: JSON inside an answer is the answer.
    "json_after_text": "Here is the result: " + SINGLE,
    "json_answer": '{"answer": 42}',
    "json_answer_with_name": '{"name": "Bob", "age": 30}',
    "missing_parameters": '{"name": "toolWithoutParams"}',
    "invalid_json": '{"name": "invalidTool", "parameters": {invalid json}',
    "cut_by_length_limit": '{"name": "searchTool", "parameters": {"query": "te',
    # Raw code for code_interpreter, and calls that are no built-in call: text.
    "builtin_raw_code": "<|python_tag|>import math\nprint(math.pi)",
    "builtin_not_a_literal": "<|python_tag|>brave_search.call(query=os.getcwd())",
    "builtin_positional": '<|python_tag|>brave_search.call("weather")',
    "builtin_cut": '<|python_tag|>brave_search.call(query="weather',
    "code_block": "function f() { return 1; }",
    "semicolon_then_text": ";) just kidding",
}


@pytest.mark.parametrize("name", VALID)
def test_extract(name: str) -> None:
    text, expected = VALID[name]
    assert PARSER.extract(text) == expected


@pytest.mark.parametrize("name", CONTENT)
def test_what_is_not_a_call_stays_content(name: str) -> None:
    text = CONTENT[name]
    assert PARSER.extract(text) == ParsedOutput(text)


@pytest.mark.parametrize("name", [*VALID, *CONTENT])
def test_streaming_in_any_pieces_gives_the_same_result(name: str) -> None:
    text = VALID[name][0] if name in VALID else CONTENT[name]
    whole = PARSER.extract(text)
    for way, pieces in splits(text).items():
        assert streamed(PARSER, pieces) == whole, way


@pytest.mark.parametrize("name", VALID)
def test_streaming_arguments_as_they_come_gives_the_same_calls(name: str) -> None:
    text, expected = VALID[name]
    for way, pieces in splits(text).items():
        assert streamed(PARSER, pieces, stream_arguments=True) == expected, way
