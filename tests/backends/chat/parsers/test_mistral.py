"""Mistral calls: the JSON list after ``[TOOL_CALLS]`` (before tokenizer v11) and
``[TOOL_CALLS]name[ARGS]{...}`` (v11 and later)."""

from __future__ import annotations

import pytest

from backends.chat.parsers import ParsedOutput, ToolCall, get_tool_parser
from tests.backends.chat.parsers.streaming import splits, streamed

pytestmark = pytest.mark.unit

PARSER = get_tool_parser("mistral")

SF = '{"city": "San Francisco", "state": "CA", "unit": "celsius"}'
ADD = '{"a": 3.5, "b": 4}'
MULTIPLY = '{"a": 3, "b": 6}'

VALID = {
    "list_single": (
        '[TOOL_CALLS][{"name": "add", "arguments": ' + ADD + "}]",
        ParsedOutput("", [ToolCall("add", ADD)]),
    ),
    # Mistral 7B v0.3 puts a space after the token, and sometimes an id in each call: kept.
    "list_with_space_and_id": (
        '[TOOL_CALLS] [{"name": "get_current_weather", "arguments": '
        + SF
        + ', "id": "bAq3ZBd5V"}]',
        ParsedOutput("", [ToolCall("get_current_weather", SF, "bAq3ZBd5V")]),
    ),
    "list_parallel": (
        '[TOOL_CALLS] [{"name": "add", "arguments": '
        + ADD
        + '}, {"name": "get_current_weather", "arguments":'
        + SF
        + "}]",
        ParsedOutput("", [ToolCall("add", ADD), ToolCall("get_current_weather", SF)]),
    ),
    "list_arguments_before_name": (
        '[TOOL_CALLS] [{"arguments":{"name": "John Doe"}, "name": "get_age"}]',
        ParsedOutput("", [ToolCall("get_age", '{"name": "John Doe"}')]),
    ),
    "content_before": (
        'Hello[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1, "b": 2}}]',
        ParsedOutput("Hello", [ToolCall("add", '{"a": 1, "b": 2}')]),
    ),
    "list_then_trailing_text": (
        '[TOOL_CALLS] [{"name": "add", "arguments": ' + ADD + "}]\nextra trailing data",
        ParsedOutput("extra trailing data", [ToolCall("add", ADD)]),
    ),
    "v11_single": (
        "[TOOL_CALLS]get_current_weather[ARGS]" + SF,
        ParsedOutput("", [ToolCall("get_current_weather", SF)]),
    ),
    "v11_parallel": (
        "[TOOL_CALLS]add[ARGS]" + ADD + "[TOOL_CALLS]multiply[ARGS]" + MULTIPLY,
        ParsedOutput("", [ToolCall("add", ADD), ToolCall("multiply", MULTIPLY)]),
    ),
    "v11_call_id": (
        "[TOOL_CALLS]add[CALL_ID]a1b2c3d4e[ARGS]" + ADD,
        ParsedOutput("", [ToolCall("add", ADD, "a1b2c3d4e")]),
    ),
    # Decoded with special tokens skipped, "[ARGS]" is gone and the name runs into the "{".
    "v11_args_token_skipped": (
        "[TOOL_CALLS]add_this_and_that" + ADD,
        ParsedOutput("", [ToolCall("add_this_and_that", ADD)]),
    ),
    "v11_content_before": (
        "Sure, adding them.[TOOL_CALLS]add[ARGS]" + ADD,
        ParsedOutput("Sure, adding them.", [ToolCall("add", ADD)]),
    ),
}

MALFORMED = {
    "not_json": "[TOOL_CALLS] not json at all",
    "empty_list": "[TOOL_CALLS][]",
    "list_cut_by_length_limit": '[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5',
    "list_bad_value": '[TOOL_CALLS][{"name": "add", "arguments": {"a": 3.5, "b": }}]',
    "v11_bad_arguments": '[TOOL_CALLS]add[ARGS]{"a": 3.5, "b": }',
    "v11_arguments_not_an_object": "[TOOL_CALLS]add[ARGS][1, 2]",
    "v11_unknown_tag": '[TOOL_CALLS]add[ARG]{"a": 1}',
    "v11_name_only": "[TOOL_CALLS]add",
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
        got = streamed(PARSER, pieces, stream_arguments=True)
        if name == "list_with_space_and_id" and way != "whole":
            # The id comes after the arguments: the call was announced before it was read.
            got = ParsedOutput(
                got.content, [ToolCall(c.name, c.arguments, "bAq3ZBd5V") for c in got.calls]
            )
            assert streamed(PARSER, pieces, stream_arguments=True).calls[0].id is None
        assert got == expected, way
