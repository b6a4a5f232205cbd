"""DeepSeek-V3 / R1 calls between special tokens: type, name and a fenced JSON block (V3, R1,
the R1 distills), or the name and bare JSON (V3.1)."""

from __future__ import annotations

import pytest

from backends.chat.parsers import ParsedOutput, ToolCall, get_tool_parser
from tests.backends.chat.parsers.streaming import splits, streamed

pytestmark = pytest.mark.unit

PARSER = get_tool_parser("deepseek_v3")

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
TOKYO = '{"location": "Tokyo", "units": "celsius"}'
PARIS = '{"city": "Paris"}'


def v3(name: str, arguments: str) -> str:
    return f"{CALL}function{SEP}{name}\n```json\n{arguments}\n```{CALL_END}"


VALID = {
    # As DeepSeek-V3's and R1's model cards and their chat templates write a call.
    "v3_single_after_content": (
        "Let me help you with that.\n" + BEGIN + v3("get_weather", TOKYO) + END,
        ParsedOutput("Let me help you with that.", [ToolCall("get_weather", TOKYO)]),
    ),
    "v3_parallel": (
        BEGIN + v3("get_weather", TOKYO) + "\n" + v3("get_weather", PARIS) + END,
        ParsedOutput("", [ToolCall("get_weather", TOKYO), ToolCall("get_weather", PARIS)]),
    ),
    "v3_content_after": (
        BEGIN + v3("get_weather", TOKYO) + END + "\nThe weather in Tokyo is...",
        ParsedOutput("The weather in Tokyo is...", [ToolCall("get_weather", TOKYO)]),
    ),
    # A stop string or a length limit cut the closing token: the whole call stands.
    "v3_cut_after_the_call": (
        BEGIN + v3("get_weather", TOKYO),
        ParsedOutput("", [ToolCall("get_weather", TOKYO)]),
    ),
    "v3_nested_arguments": (
        BEGIN + v3("search", '{"q": "a```b", "filters": {"site": ["x", "y"]}}') + END,
        ParsedOutput("", [ToolCall("search", '{"q": "a```b", "filters": {"site": ["x", "y"]}}')]),
    ),
    "v31_single": (
        f"{BEGIN}{CALL}get_weather{SEP}{PARIS}{CALL_END}{END}",
        ParsedOutput("", [ToolCall("get_weather", PARIS)]),
    ),
    "v31_parallel": (
        f"{BEGIN}{CALL}get_weather{SEP}{PARIS}{CALL_END}{CALL}get_time{SEP}{{}}{CALL_END}{END}",
        ParsedOutput("", [ToolCall("get_weather", PARIS), ToolCall("get_time", "{}")]),
    ),
}

MALFORMED = {
    "no_call": BEGIN + END,
    "cut_in_the_arguments": BEGIN + f"{CALL}function{SEP}get_weather\n```json\n" + '{"city": "Pa',
    "bad_json": BEGIN + v3("get_weather", '{"city": }') + END,
    "arguments_not_an_object": BEGIN + v3("get_weather", "[1, 2]") + END,
    "no_fence": BEGIN + f"{CALL}function{SEP}get_weather\n{PARIS}{CALL_END}" + END,
    "empty_name": BEGIN + f"{CALL}{SEP}{PARIS}{CALL_END}" + END,
    "text_instead_of_a_call": BEGIN + "I will call it" + END,
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


def test_the_markers_are_kept_tokens_where_the_vocabulary_has_them() -> None:
    parser = get_tool_parser("deepseek_v3", {BEGIN: 128806, SEP: 128814, "<｜User｜>": 1})
    assert parser.kept_tokens() == {128806: BEGIN, 128814: SEP}
