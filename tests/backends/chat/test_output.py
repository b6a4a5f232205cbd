"""A choice's output split into content and calls: the calls' ids."""

from __future__ import annotations

import re

import pytest

from backends.chat.output import ChatOutput
from backends.chat.parsers import get_tool_parser

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
