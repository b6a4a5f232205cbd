"""Pieces of the llguidance Lark grammars that force a model to call tools.

A forced-call grammar spells each call exactly as the format writes it, with the tool's name
fixed and its arguments an embedded JSON schema (``%json {...}``), so whatever the model
generates under it parses back into valid calls. Arguments use the spacing of Python's
``json.dumps`` (", " and ": "), which is what the models saw in training; free whitespace would
also let a weak model loop on spaces forever.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backends.chat.parsers.types import ToolSpec

JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def lark_string(text: str) -> str:
    """A Lark string literal matching ``text`` exactly (JSON string escapes are Lark's)."""
    return json.dumps(text, ensure_ascii=False)


def token_or_text(text: str, special_tokens: Mapping[str, int]) -> str:
    """A marker: the special token itself when the vocabulary has it (a special token cannot be
    spelled with ordinary tokens), else the text."""
    token_id = special_tokens.get(text)
    return f"<[{token_id}]>" if token_id is not None else lark_string(text)


def json_call_header(name: str, arguments_key: str = "arguments") -> str:
    """The start of a call object, up to its arguments: ``{"name": "f", "arguments": ``."""
    return '{"name": ' + json.dumps(name, ensure_ascii=False) + f', "{arguments_key}": '


def arguments_schema(tool: ToolSpec) -> dict[str, Any]:
    """The tool's parameter schema, made to describe an object in the calls' JSON style.

    Objects that declare their properties but not ``additionalProperties`` get ``false``, as
    OpenAI's strict mode requires: JSON Schema's default (anything else may follow) let an
    untrained model write invented keys until ``max_tokens`` after the real ones (LangChain's
    tool schemas leave it out)."""
    schema: dict[str, Any] = _closed(dict(tool.parameters or {}))
    kind = schema.setdefault("type", "object")
    if kind != "object":
        raise ValueError(f"Tool {tool.name!r}: its parameters must describe a JSON object.")
    schema.setdefault("x-guidance", JSON_STYLE)
    return schema


_SUBSCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def _closed(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that lists properties
    and says nothing about others, nested ones too."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA:
        if isinstance(out.get(key), dict):
            out[key] = _closed(out[key])
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_closed(s) for s in out[key]]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _closed(s) for name, s in out[key].items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def chosen_tools(tools: Sequence[ToolSpec], tool_name: str | None) -> list[ToolSpec]:
    if not tools:
        raise ValueError("A forced call needs at least one tool.")
    if tool_name is None:
        return list(tools)
    chosen = [t for t in tools if t.name == tool_name]
    if not chosen:
        raise ValueError(f"No tool is named {tool_name!r}.")
    return chosen[:1]


def forced_call_grammar(
    tools: Sequence[ToolSpec],
    *,
    tool_name: str | None,
    parallel: bool,
    call: Callable[[ToolSpec, str], str],
    separator: str = "",
    before: str = "",
    after: str = "",
) -> str:
    """``start: before call (separator call)* after``, one alternative per tool.

    ``call(tool, args_rule)`` is the Lark expression of one call to ``tool`` whose arguments
    are the rule ``args_rule``; ``separator``, ``before`` and ``after`` are Lark expressions
    (empty for none). A named tool or ``parallel=False`` allows exactly one call."""
    chosen = chosen_tools(tools, tool_name)
    rules = ["call: " + " | ".join(f"call_{i}" for i in range(len(chosen)))]
    for i, tool in enumerate(chosen):
        rules.append(f"call_{i}: {call(tool, f'args_{i}')}")
        rules.append(f"args_{i}: %json {json.dumps(arguments_schema(tool), ensure_ascii=False)}")
    more = f" ({separator} call)*" if parallel and tool_name is None else ""
    start = " ".join(part for part in (before, "call" + more, after) if part)
    return "\n".join([f"start: {start}", *rules]) + "\n"
