"""Phi-4-mini calls: one JSON list of calls between special tokens::

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|/tool_call|>

A single call object without the list is accepted too.
"""

from __future__ import annotations

from collections.abc import Sequence

from backends.chat.parsers.call_block import CallBlock
from backends.chat.parsers.call_bodies import ListOrObject
from backends.chat.parsers.catalog import register_tool_parser
from backends.chat.parsers.grammar import forced_call_grammar as build_grammar
from backends.chat.parsers.grammar import json_call_header, lark_string, token_or_text
from backends.chat.parsers.tool_parser import ToolParser
from backends.chat.parsers.types import ToolSpec

OPEN = "<|tool_call|>"
CLOSE = "<|/tool_call|>"


@register_tool_parser("phi4_mini_json")
class Phi4MiniToolParser(ToolParser):
    markers = (OPEN,)
    lazy_trigger = OPEN
    marker_tokens = (OPEN, CLOSE)

    def open_block(self, marker: str) -> CallBlock:
        return CallBlock(ListOrObject(), closer=CLOSE)

    def forced_call_grammar(
        self, tools: Sequence[ToolSpec], *, tool_name: str | None = None, parallel: bool = True
    ) -> str:
        """``<|tool_call|>[call, call, ...]<|/tool_call|>``."""
        tokens = self.special_tokens

        def call(tool: ToolSpec, args: str) -> str:
            return f'{lark_string(json_call_header(tool.name))} {args} "}}"'

        return build_grammar(
            tools,
            tool_name=tool_name,
            parallel=parallel,
            call=call,
            separator='", "',
            before=f'{token_or_text(OPEN, tokens)} "["',
            after=f'"]" {token_or_text(CLOSE, tokens)}',
        )
