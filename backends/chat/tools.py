"""Tools on a chat request: offered to the model, forced by a grammar, parsed out of its output.

``tool_choice`` follows OpenAI: ``auto`` offers the tools and parses whatever calls the model
writes; ``none`` does not offer them; ``required`` and a tool's name force calls by constrained
decoding, with a grammar in the model's own call format that admits only valid calls to the
given tools (``ToolParser.forced_call_grammar``), so a forced call is valid JSON matching its
schema even from a small model.
"""

from __future__ import annotations

import dataclasses

from backends.chat.parsers import tool_specs
from backends.core.handle import OutputParsers
from backends.core.request import GenerationRequest
from backends.errors import InvalidRequest
from backends.models.loader import LoadedModel


def apply_tools(model: LoadedModel, request: GenerationRequest) -> GenerationRequest:
    """The request as the model gets it: tools dropped for ``none``, a forced-call grammar
    added for ``required`` or a name. Refuses what cannot be honoured."""
    chat, choice = request.chat, request.tool_choice
    tools = chat.tools if chat is not None else None
    if not tools:
        if choice not in ("auto", "none"):
            raise InvalidRequest(
                "tool_choice asks for a call but no tools were given.", param="tool_choice"
            )
        return request
    assert chat is not None
    if choice == "none":
        return dataclasses.replace(request, prompt=dataclasses.replace(chat, tools=None))
    parser = model.tool_parser
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
        return request
    name = None if choice == "required" else choice
    if name is not None and name not in {s.name for s in specs}:
        raise InvalidRequest(
            f"tool_choice names {name!r}, which is not among the tools.", param="tool_choice"
        )
    if request.sampling.guidance is not None:
        raise InvalidRequest(
            f"A forced tool call cannot be combined with {request.param('guidance')}.",
            param=request.param("tool_choice"),
        )
    try:
        grammar = parser.forced_call_grammar(
            specs, tool_name=name, parallel=request.parallel_tool_calls
        )
    except ValueError as exc:
        raise InvalidRequest(f"The tools cannot be forced: {exc}", param="tools") from None
    sampling = dataclasses.replace(request.sampling, guidance=("lark_grammar", grammar))
    return dataclasses.replace(
        request, sampling=sampling, param_names={**request.param_names, "guidance": "tools"}
    )


def output_parsers(model: LoadedModel, request: GenerationRequest) -> OutputParsers | None:
    """How this request's output is split: calls when tools are offered, thinking when the
    door reports it apart."""
    chat = request.chat
    tools = model.tool_parser if chat is not None and chat.tools else None
    reasoning = model.reasoning_parser if chat is not None and request.split_reasoning else None
    return OutputParsers(tools, reasoning) if tools or reasoning else None
