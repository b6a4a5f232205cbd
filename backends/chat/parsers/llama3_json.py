"""Llama 3.1 / 3.2 / 3.3 JSON calls.

With the JSON tool prompt of Meta's template the model answers with the call itself, a bare
JSON object, sometimes after the ``<|python_tag|>`` token; parallel calls are separated by
``;``::

    {"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", ...}

A built-in tool (brave_search, wolfram_alpha) is called in Python after ``<|python_tag|>``:
``brave_search.call(query="...")`` (:mod:`.python_call`).

A bare ``{`` opens a call only at the start of the output or right after a call: JSON further
into a prose answer is content (vLLM also looks there when not streaming, and so disagrees with
its own streaming). A call must carry its ``parameters`` (or ``arguments``), since a bare
object with a ``name`` key alone may just be an answer in JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

from backends.chat.parsers.call_block import CallBlock
from backends.chat.parsers.call_bodies import CallObject
from backends.chat.parsers.catalog import register_tool_parser
from backends.chat.parsers.grammar import forced_call_grammar as build_grammar
from backends.chat.parsers.grammar import json_call_header, lark_string
from backends.chat.parsers.python_call import JsonOrPythonCall
from backends.chat.parsers.tool_parser import ToolParser
from backends.chat.parsers.types import ToolSpec

PYTHON_TAG = "<|python_tag|>"


@register_tool_parser("llama3_json")
class Llama3JsonToolParser(ToolParser):
    markers = (PYTHON_TAG,)
    boundary_markers = ("{", ";")
    marker_tokens = (PYTHON_TAG,)

    def open_block(self, marker: str) -> CallBlock:
        body = CallObject(arguments_optional=False)
        if marker == PYTHON_TAG:
            return CallBlock(JsonOrPythonCall(body))
        if marker == "{":
            body.feed(marker, 0)  # the marker is the object's own first character
        return CallBlock(body)

    def forced_call_grammar(
        self, tools: Sequence[ToolSpec], *, tool_name: str | None = None, parallel: bool = True
    ) -> str:
        """``{"name": ..., "parameters": ...}``, parallel calls separated by ``"; "``.

        No ``<|python_tag|>``: Meta's JSON tool prompt asks for the bare object."""

        def call(tool: ToolSpec, args: str) -> str:
            return f'{lark_string(json_call_header(tool.name, "parameters"))} {args} "}}"'

        return build_grammar(
            tools, tool_name=tool_name, parallel=parallel, call=call, separator='"; "'
        )
