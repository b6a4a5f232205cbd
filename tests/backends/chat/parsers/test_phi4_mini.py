"""Phi-4-mini calls: a JSON list between ``<|tool_call|>`` and ``<|/tool_call|>``."""

from __future__ import annotations

import pytest

from backends.chat.parsers import ParsedOutput, ToolCall, get_tool_parser
from tests.backends.chat.parsers.streaming import splits, streamed

pytestmark = pytest.mark.unit

PARSER = get_tool_parser("phi4_mini_json")

TOKYO = '{"city": "Tokyo"}'
ADD_MUL = (
    '<|tool_call|>[{"name": "add", "arguments": {"x": 123345432, "y": 4563464236}}, '
    '{"name": "mul", "arguments": {"x": 874284, "y": 912429}}]<|/tool_call|>'
)

VALID = {
    "single": (
        '<|tool_call|>[{"name": "get_weather", "arguments": ' + TOKYO + "}]<|/tool_call|>",
        ParsedOutput("", [ToolCall("get_weather", TOKYO)]),
    ),
    "parallel": (
        ADD_MUL,
        ParsedOutput(
            "",
            [
                ToolCall("add", '{"x": 123345432, "y": 4563464236}'),
                ToolCall("mul", '{"x": 874284, "y": 912429}'),
            ],
        ),
    ),
    "pretty_with_text_around": (
        "Let me check the weather for you.\n<|tool_call|>[\n"
        '  {"name": "get_weather", "arguments": {"city": "Tokyo"}},\n'
        '  {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}\n'
        "]<|/tool_call|>\nWould you like to know more?",
        ParsedOutput(
            "Let me check the weather for you.\nWould you like to know more?",
            [ToolCall("get_weather", TOKYO), ToolCall("get_time", '{"timezone": "Asia/Tokyo"}')],
        ),
    ),
    "single_object_without_list": (
        '<|tool_call|>{"name": "get_weather", "arguments": ' + TOKYO + "}<|/tool_call|>",
        ParsedOutput("", [ToolCall("get_weather", TOKYO)]),
    ),
    "empty_arguments": (
        '<|tool_call|>[{"name": "refresh", "arguments": {}}]<|/tool_call|>',
        ParsedOutput("", [ToolCall("refresh", "{}")]),
    ),
    "escaped_strings": (
        '<|tool_call|>[{"name": "test_function", "arguments": {"quoted": "He said \\"hello\\"", '
        '"path": "C:\\\\Users\\\\file.txt", "newline": "line1\\nline2"}}]<|/tool_call|>',
        ParsedOutput(
            "",
            [
                ToolCall(
                    "test_function",
                    '{"quoted": "He said \\"hello\\"", "path": "C:\\\\Users\\\\file.txt", '
                    '"newline": "line1\\nline2"}',
                )
            ],
        ),
    ),
    "no_closing_token": (
        '<|tool_call|>[{"name": "get_weather", "arguments": ' + TOKYO + "}]",
        ParsedOutput("", [ToolCall("get_weather", TOKYO)]),
    ),
}

MALFORMED = {
    "unclosed_arguments": '<|tool_call|>[{"name": "func", "arguments": {<|/tool_call|>',
    "arguments_not_an_object": (
        '<|tool_call|>[{"name": "func", "arguments": "not a dict"}]<|/tool_call|>'
    ),
    "empty_list": "<|tool_call|>[] This is just text",
    "text_in_list": "<|tool_call|>[ This is just text ]<|/tool_call|>",
    "second_call_broken": (
        '<|tool_call|>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {]<|/tool_call|>'
    ),
}


@pytest.mark.parametrize("name", VALID)
def test_extract(name: str) -> None:
    text, expected = VALID[name]
    assert PARSER.extract(text) == expected


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_call_stays_content(name: str) -> None:
    text = MALFORMED[name]
    assert PARSER.extract(text) == ParsedOutput(text)


@pytest.mark.parametrize("name", [*VALID, *MALFORMED])
def test_streaming_in_any_pieces_gives_the_same_result(name: str) -> None:
    text = VALID[name][0] if name in VALID else MALFORMED[name]
    whole = PARSER.extract(text)
    for way, pieces in splits(text).items():
        assert streamed(PARSER, pieces) == whole, way


@pytest.mark.parametrize("name", VALID)
def test_streaming_arguments_as_they_come_gives_the_same_calls(name: str) -> None:
    text, expected = VALID[name]
    for way, pieces in splits(text).items():
        assert streamed(PARSER, pieces, stream_arguments=True) == expected, way
