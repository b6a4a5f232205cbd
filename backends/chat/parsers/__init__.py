"""Parsing model output for agents: tool calls and reasoning, whole or streamed.

No HTTP here. A door picks the parsers for its model once (:func:`choose_tool_parser`,
:func:`choose_reasoning_parser`, then :func:`get_tool_parser` / :func:`get_reasoning_parser`).
For each output it runs the reasoning stream first and feeds its content to the tool-call
stream, writing back into the text the marker tokens the decoder drops
(:meth:`ToolParser.kept_tokens`). For ``tool_choice="required"`` or a named tool it passes the
format's :meth:`ToolParser.forced_call_grammar` to the sampler as a Lark grammar (llguidance).

One module per tool-call format, registered by name: ``hermes`` (Hermes 2 Pro, Qwen2.5,
Qwen3), ``llama3_json`` (Llama 3.x, with its built-in ``<|python_tag|>`` calls),
``mistral``, ``phi4_mini_json`` (Phi-4-mini) and ``deepseek_v3`` (DeepSeek-V3, R1 and the R1
distills).
"""

from __future__ import annotations

# The format modules register themselves when imported.
from backends.chat.parsers import deepseek, hermes, llama3_json, mistral, phi4_mini  # noqa: F401
from backends.chat.parsers.catalog import (
    UnknownParser,
    choose_reasoning_parser,
    choose_tool_parser,
    get_reasoning_parser,
    get_tool_parser,
    reasoning_parser_names,
    tool_parser_names,
)
from backends.chat.parsers.reasoning import ReasoningParser, ReasoningStream
from backends.chat.parsers.tool_parser import ToolParser
from backends.chat.parsers.tool_stream import ToolCallStream
from backends.chat.parsers.types import (
    CUT,
    ContentDelta,
    FailedCall,
    ParsedOutput,
    ParserEvent,
    ReasoningDelta,
    ReasoningEvent,
    ReasoningOutput,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStart,
    ToolSpec,
    tool_specs,
)

__all__ = [
    "CUT",
    "ContentDelta",
    "FailedCall",
    "ParsedOutput",
    "ParserEvent",
    "ReasoningDelta",
    "ReasoningEvent",
    "ReasoningOutput",
    "ReasoningParser",
    "ReasoningStream",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallStart",
    "ToolCallStream",
    "ToolParser",
    "ToolSpec",
    "UnknownParser",
    "choose_reasoning_parser",
    "choose_tool_parser",
    "get_reasoning_parser",
    "get_tool_parser",
    "reasoning_parser_names",
    "tool_parser_names",
    "tool_specs",
]
