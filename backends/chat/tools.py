"""Tools on a chat request: offered to the model, forced by a grammar, parsed out of its output.

``tool_choice`` follows OpenAI: ``auto`` offers the tools and parses whatever calls the model
writes; ``none`` does not offer them; ``required`` and a tool's name force calls by constrained
decoding, with a grammar in the model's own call format that admits only valid calls to the
given tools (``ToolParser.forced_call_grammar``), so a forced call is valid JSON matching its
schema even from a small model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backends.chat.parsers import ToolParser, ToolSpec, tool_specs
from backends.errors import InvalidRequest
from backends.types import CallGrammar


@dataclass(frozen=True)
class ToolPlan:
    """What a request's tools do to its generation."""

    offered: bool  # the chat template gets the tools
    grammar: str | None = None  # a Lark grammar (llguidance) that forces the calls
    call_grammar: CallGrammar | None = None  # "auto": holds the calls the model opens


def plan_tools(
    parser: ToolParser | None,
    tools: Sequence[Mapping[str, Any]] | None,
    choice: str,
    *,
    parallel: bool,
    guided_by: str | None = None,
    held: Callable[[ToolSpec], ToolSpec] | None = None,
) -> ToolPlan:
    """How ``tool_choice`` is honoured for ``tools`` in this model's call format. Refuses what
    cannot be: a forced call without tools, tools the model cannot call, an unknown name, a
    forced call together with the request's own guidance (``guided_by`` names its field).
    ``held`` is each tool as the lazy grammar of ``auto`` holds its calls (the core's
    :func:`backends.core.grammar_check.held_tool`: a schema llguidance refuses relaxed)."""
    if not tools:
        if choice not in ("auto", "none"):
            raise InvalidRequest(
                "tool_choice asks for a call but no tools were given.", param="tool_choice"
            )
        return ToolPlan(offered=False)
    if choice == "none":
        return ToolPlan(offered=False)
    if parser is None:
        raise InvalidRequest(
            "This model has no tool-call format: its chat template takes no tools (or set "
            "GENAI_TOOL_PARSER for it).",
            param="tools",
        )
    try:
        specs = tool_specs(tools)
    except (KeyError, TypeError, AttributeError):
        raise InvalidRequest("Every tool needs a function with a name.", param="tools") from None
    if choice == "auto":
        if guided_by is not None:  # the request's own grammar holds the whole output
            return ToolPlan(offered=True)
        if held is not None:
            specs = [held(s) for s in specs]
        try:
            return ToolPlan(
                offered=True, call_grammar=parser.lazy_call_grammar(specs, parallel=parallel)
            )
        except ValueError:  # a tool whose parameters are no object: its calls stay free
            return ToolPlan(offered=True)
    name = None if choice == "required" else choice
    if name is not None and name not in {s.name for s in specs}:
        raise InvalidRequest(
            f"tool_choice names {name!r}, which is not among the tools.", param="tool_choice"
        )
    if guided_by is not None:
        raise InvalidRequest(
            ["A forced tool call cannot be combined with ", guided_by, "."], param="tool_choice"
        )
    try:
        grammar = parser.forced_call_grammar(specs, tool_name=name, parallel=parallel)
    except ValueError as exc:
        raise InvalidRequest(f"The tools cannot be forced: {exc}", param="tools") from None
    return ToolPlan(offered=True, grammar=grammar)
