"""A choice's output split into content and calls: the calls' ids."""

from __future__ import annotations

import re

import pytest

from backends.chat.output import ChatOutput
from backends.chat.parsers import FailedCall, get_tool_parser

pytestmark = pytest.mark.unit

ARGS = '{"city": "Paris"}'


def call_ids(parser: str, text: str) -> list[str]:
    output = ChatOutput(get_tool_parser(parser), None)
    output.feed(text)
    output.finish()
    return [call.id for _, call in sorted(output.calls.items())]


def test_a_mistral_models_own_ids_are_kept() -> None:
    listed = '[TOOL_CALLS][{"name": "f", "arguments": ' + ARGS + ', "id": "a1B2c3D4e"}]'
    assert call_ids("mistral", listed) == ["a1B2c3D4e"]
    assert call_ids("mistral", "[TOOL_CALLS]f[CALL_ID]Zz9Yy8Xx7[ARGS]" + ARGS) == ["Zz9Yy8Xx7"]


def test_ids_the_server_makes_up_fit_the_familys_templates() -> None:
    made = call_ids("mistral", "[TOOL_CALLS]f[ARGS]" + ARGS + "[TOOL_CALLS]g[ARGS]" + ARGS)
    assert len(made) == 2 and len(set(made)) == 2
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in made), made
    [hermes] = call_ids("hermes", '<tool_call>{"name": "f", "arguments": ' + ARGS + "}</tool_call>")
    assert re.fullmatch(r"call_[0-9a-f]{24}", hermes)


def test_a_held_call_the_output_ends_inside_is_reported_apart_with_the_reason() -> None:
    output = ChatOutput(get_tool_parser("hermes"), None, calls_held=True)
    shown = output.feed("Running it.\n<tool_call>\n")
    shown2 = output.feed('{"name": "exec_command", "arguments": {"cmd": "echo hello. I think')
    last = output.finish("the call did not fit in 20 tokens")
    assert (shown.content, shown2.content, last.content) == ("Running it.", "", "")
    assert last.failed == (FailedCall("exec_command", "the call did not fit in 20 tokens"),)
    assert output.failed == list(last.failed) and output.calls == {}


def test_without_a_grammar_a_cut_call_is_content_as_before() -> None:
    output = ChatOutput(get_tool_parser("hermes"), None)
    text = '<tool_call>\n{"name": "exec_command", "arguments": {"cmd": "echo'
    assert output.feed(text).content == ""
    last = output.finish("unused")
    assert (last.content, last.failed) == (text, ())
