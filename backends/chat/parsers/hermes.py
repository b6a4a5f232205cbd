"""Hermes-style calls, as Hermes 2 Pro, Qwen2.5 and Qwen3 write them.

Each call is a JSON object in its own ``<tool_call>`` block; parallel calls are blocks in a
row, one per line::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

In Qwen's vocabulary ``<tool_call>`` is an ordinary (non-special) added token, so it reaches the
text however the output is decoded.
"""

from __future__ import annotations

from collections.abc import Sequence

from backends.chat.parsers.call_block import CallBlock
from backends.chat.parsers.call_bodies import CallObject
from backends.chat.parsers.catalog import register_tool_parser
from backends.chat.parsers.grammar import forced_call_grammar as build_grammar
from backends.chat.parsers.grammar import json_call_header, lark_string, token_or_text
from backends.chat.parsers.tool_parser import ToolParser
from backends.chat.parsers.types import ToolSpec

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


@register_tool_parser("hermes")
class HermesToolParser(ToolParser):
    markers = (OPEN,)
    marker_tokens = (OPEN, CLOSE)
    lazy_trigger = OPEN

    def open_block(self, marker: str) -> CallBlock:
        return CallBlock(CallObject(), closer=CLOSE)

    def forced_call_grammar(
        self, tools: Sequence[ToolSpec], *, tool_name: str | None = None, parallel: bool = True
    ) -> str:
        """``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``, one block per line."""
        tokens = self.special_tokens
        open_, close = token_or_text(OPEN, tokens), token_or_text(CLOSE, tokens)

        def call(tool: ToolSpec, args: str) -> str:
            header = lark_string("\n" + json_call_header(tool.name))
            return f'{open_} {header} {args} "}}\\n" {close}'

        return build_grammar(
            tools, tool_name=tool_name, parallel=parallel, call=call, separator=r'"\n"'
        )
