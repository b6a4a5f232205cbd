"""Hermes / Qwen2.5 / Qwen3 ``<tool_call>`` blocks, written as those models write them."""

from __future__ import annotations

import pytest

from backends.chat.parsers import ParsedOutput, ToolCall, get_tool_parser
from tests.backends.chat.parsers.streaming import splits, streamed

pytestmark = pytest.mark.unit

PARSER = get_tool_parser("hermes")

WEATHER_SF = '{"location": "San Francisco, CA, USA", "unit": "celsius"}'
SINGLE = (
    "<tool_call>\n"
    '{"name": "get_current_temperature", "arguments": ' + WEATHER_SF + "}\n"
    "</tool_call>"
)
PARALLEL = (
    "<tool_call>\n"
    '{"name": "get_current_temperature", "arguments": {"location": "San Francisco, CA, USA"}}\n'
    "</tool_call>\n"
    "<tool_call>\n"
    '{"name": "get_temperature_date", "arguments": '
    '{"location": "San Francisco, CA, USA", "date": "2024-10-01"}}\n'
    "</tool_call>"
)
PARALLEL_CALLS = [
    ToolCall("get_current_temperature", '{"location": "San Francisco, CA, USA"}'),
    ToolCall(
        "get_temperature_date", '{"location": "San Francisco, CA, USA", "date": "2024-10-01"}'
    ),
]
CODE_ARGUMENTS = r'{"code": "print(\"</tool_call>\")\nx = {1: [2]}  # not {a call}"}'

VALID = {
    "single": (SINGLE, ParsedOutput("", [ToolCall("get_current_temperature", WEATHER_SF)])),
    "parallel": (PARALLEL, ParsedOutput("", PARALLEL_CALLS)),
    "text_before": (
        "I'll look up the current temperature in San Francisco for you.\n\n" + SINGLE,
        ParsedOutput(
            "I'll look up the current temperature in San Francisco for you.",
            [ToolCall("get_current_temperature", WEATHER_SF)],
        ),
    ),
    "text_after": (
        SINGLE + "\nI asked for the temperature; the answer follows.",
        ParsedOutput(
            "I asked for the temperature; the answer follows.",
            [ToolCall("get_current_temperature", WEATHER_SF)],
        ),
    ),
    "text_around_parallel": (
        "Checking both.\n" + PARALLEL + "\nOne moment.",
        ParsedOutput("Checking both.\nOne moment.", PARALLEL_CALLS),
    ),
    "no_call": (
        "Use a < b, <b>bold</b> and <tool> tags; <tool_call is not a call.",
        ParsedOutput("Use a < b, <b>bold</b> and <tool> tags; <tool_call is not a call."),
    ),
    "arguments_before_name": (
        '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>',
        ParsedOutput("", [ToolCall("get_weather", '{"city": "Paris"}')]),
    ),
    # Granite-style: the arguments object written as a JSON string.
    "arguments_as_string": (
        '<tool_call>\n{"name": "get_db_config", "arguments": "{\\"param\\": \\"max\\"}"}\n'
        "</tool_call>",
        ParsedOutput("", [ToolCall("get_db_config", '{"param": "max"}')]),
    ),
    # A closing tag and braces inside a string end nothing.
    "marker_inside_string": (
        '<tool_call>\n{"name": "run_python", "arguments": ' + CODE_ARGUMENTS + "}\n</tool_call>",
        ParsedOutput("", [ToolCall("run_python", CODE_ARGUMENTS)]),
    ),
    "unicode_and_nesting": (
        '<tool_call>\n{"name": "search", "arguments": {"query": "café – 東京 🎉", '
        '"filters": {"tags": ["a", "b"], "limit": 10, "exact": false, "score": -1.5e3, '
        '"cursor": null}}}\n</tool_call>',
        ParsedOutput(
            "",
            [
                ToolCall(
                    "search",
                    '{"query": "café – 東京 🎉", "filters": {"tags": ["a", "b"], "limit": 10, '
                    '"exact": false, "score": -1.5e3, "cursor": null}}',
                )
            ],
        ),
    ),
    "pretty_printed": (
        '<tool_call>\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n'
        "</tool_call>",
        ParsedOutput("", [ToolCall("get_weather", '{\n    "city": "Paris"\n  }')]),
    ),
    # A stop string or the length limit cut the closing tag: the call itself is whole.
    "no_closing_tag": (
        '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}',
        ParsedOutput("", [ToolCall("final_answer", '{"trigger": true}')]),
    ),
    "half_closing_tag": (
        '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_c',
        ParsedOutput("", [ToolCall("final_answer", '{"trigger": true}')]),
    ),
    "no_arguments": (
        '<tool_call>\n{"name": "list_files"}\n</tool_call>',
        ParsedOutput("", [ToolCall("list_files", "{}")]),
    ),
    "parameters_key": (
        '<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>',
        ParsedOutput("", [ToolCall("get_weather", '{"city": "Paris"}')]),
    ),
    "valid_then_malformed": (
        SINGLE + '\n<tool_call>\n{"name": "get_time", "arguments": {"tz": }}\n</tool_call>',
        ParsedOutput(
            '<tool_call>\n{"name": "get_time", "arguments": {"tz": }}\n</tool_call>',
            [ToolCall("get_current_temperature", WEATHER_SF)],
        ),
    ),
    # The first marker is not followed by a call; the second one is.
    "broken_marker_then_call": (
        '<tool_call>oops <tool_call>{"name": "ping", "arguments": {}}</tool_call>',
        ParsedOutput("<tool_call>oops", [ToolCall("ping", "{}")]),
    ),
}

# Never lost, never raising: all of it stays content, exactly.
MALFORMED = {
    "missing_brace": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'
    ),
    "cut_by_length_limit": (
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    ),
    "python_quotes": (
        "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n</tool_call>"
    ),
    "junk_before_closing_tag": (
        '<tool_call>\n{"name": "ping", "arguments": {}} trailing\n</tool_call>'
    ),
    "empty_block": "<tool_call>\n</tool_call>",
    "not_a_call_object": '<tool_call>\n{"function": "ping"}\n</tool_call>',
    "arguments_not_an_object": '<tool_call>\n{"name": "ping", "arguments": [1, 2]}\n</tool_call>',
    "name_not_a_string": '<tool_call>\n{"name": 7, "arguments": {}}\n</tool_call>',
    "trailing_comma": '<tool_call>\n{"name": "ping", "arguments": {"a": 1,}}\n</tool_call>',
    "only_the_marker": "<tool_call>",
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


# A call announced early cannot be taken back if it breaks later (see test_tool_stream).
@pytest.mark.parametrize("name", [n for n in VALID if n != "valid_then_malformed"])
def test_streaming_arguments_as_they_come_gives_the_same_calls(name: str) -> None:
    text, expected = VALID[name]
    for way, pieces in splits(text).items():
        assert streamed(PARSER, pieces, stream_arguments=True) == expected, way
