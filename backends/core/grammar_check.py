"""A request's grammar, checked before anything is queued: compiled with llguidance, and fed the
tokens it forces from the start, so a schema the engine cannot use is a 400 naming the field.
The lazy tool-call grammar of ``tool_choice="auto"`` is the server's own help, not the client's
demand: a tool whose schema llguidance refuses is relaxed, and a grammar it still refuses is
left out."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from typing import Any, Literal

from backends.chat.parsers import ToolSpec
from backends.chat.parsers.grammar import arguments_schema
from backends.core.request import GenerationRequest
from backends.engine.batch.guidance import first_line
from backends.errors import Field, InvalidRequest
from backends.types import (
    GuidanceKind,
)

log = logging.getLogger(__name__)

MAX_GRAMMAR_CHARS = 256 * 1024  # a JSON schema, regex or grammar (forced tool calls: all tools)
_GRAMMAR_FORMATS = {"json_schema": "json_schema", "regex": "regex", "lark_grammar": "lark"}


def check_guidance(request: GenerationRequest, tokenizer: Any = None) -> None:
    """Compile the request's grammar with llguidance before anything is queued, so a schema
    the engine cannot use is a 400 naming the field, not a failed generation. With the
    model's llguidance ``tokenizer``, also feed the grammar the tokens it forces from the
    start: a schema that forces output without end (``{"a": {"$ref": "#"}}`` required)
    fails there, within llguidance's limits, instead of at the first generated token.
    llguidance's own limits bound the work (nesting depth, size); this may take a while for
    a large schema and releases the GIL meanwhile, so call it off the event loop."""
    guidance = request.sampling.guidance
    if guidance is None:
        return
    kind, text = guidance
    param = Field(request.guidance_field)
    if len(text) > MAX_GRAMMAR_CHARS:
        raise InvalidRequest(
            f"The {kind.replace('_', ' ')} is too large: {len(text)} characters, at most "
            f"{MAX_GRAMMAR_CHARS}.",
            param=param,
        )
    problem = _grammar_problem(kind, text, tokenizer)
    if problem:
        reason = first_line(problem)
        raise InvalidRequest(f"The {kind.replace('_', ' ')} cannot be used: {reason}", param=param)


def _grammar_problem(kind: GuidanceKind, text: str, tokenizer: Any = None) -> str:
    """What llguidance finds wrong with the grammar ("" if nothing); with the model's
    ``tokenizer``, also once its forced first tokens are fed."""
    import llguidance

    try:
        grammar = llguidance.grammar_from(_GRAMMAR_FORMATS[kind], text)  # type: ignore[arg-type]
        problem = llguidance.LLMatcher.validate_grammar(grammar)
        if not problem and tokenizer is not None:
            problem = _forced_start_problem(llguidance, tokenizer, grammar)
    except ValueError as exc:
        problem = str(exc)
    return str(problem or "")


def _forced_start_problem(llguidance: Any, tokenizer: Any, grammar: str) -> str:
    """What goes wrong when the grammar's forced first tokens are fed, then the first free
    token's mask is computed ("" if nothing): a grammar no text can satisfy (a schema that is
    only a reference to itself, ``{"$ref": "#"}``) allows no token there."""
    matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
    if not matcher.is_error():
        forced = matcher.compute_ff_tokens()
        if forced:
            matcher.consume_tokens(forced)
    if not matcher.is_error():
        matcher.compute_logit_bias()
        if matcher.is_error():
            return "no output can match it (it allows no first token)"
    return str(matcher.get_error()) if matcher.is_error() else ""


@functools.lru_cache(maxsize=64)
def usable_grammar(text: str) -> bool:
    """Whether llguidance compiles the Lark grammar ``text`` (a lazy tool-call grammar it does
    not is left out: the calls then stay free, as before, and the request goes on). Cached:
    an agent sends the same tools with every request."""
    problem = _grammar_problem("lark_grammar", text)
    if problem:
        log.info("tool-call grammar left out: %s", first_line(problem))
    return not problem


def held_tool(tool: ToolSpec) -> ToolSpec:
    """``tool`` as the lazy tool-call grammar holds its calls: as given where llguidance
    compiles its arguments' schema; else without the keywords llguidance does not implement
    (llguidance's ``lenient``: zod's records carry ``propertyNames``); else with any JSON
    object for arguments. One such tool would otherwise leave every call free, and a small
    model then calls tools that are not offered. What is relaxed is logged, once per schema."""
    try:
        schema = arguments_schema(tool)
    except ValueError:  # no object: plan_tools leaves the calls free
        return tool
    hold = _arguments_hold(tool.name, json.dumps(schema, ensure_ascii=False))
    if hold == "lenient":
        return dataclasses.replace(tool, parameters=_lenient(schema))
    if hold == "any_object":
        return dataclasses.replace(tool, parameters={"type": "object"})
    return tool


def _lenient(schema: dict[str, Any]) -> dict[str, Any]:
    style = schema.get("x-guidance")
    return {**schema, "x-guidance": {**(style if isinstance(style, dict) else {}), "lenient": True}}


@functools.lru_cache(maxsize=256)
def _arguments_hold(name: str, schema: str) -> Literal["as_given", "lenient", "any_object"]:
    import llguidance

    if not _grammar_problem("lark_grammar", _arguments_grammar(schema)):
        return "as_given"
    lenient = _arguments_grammar(json.dumps(_lenient(json.loads(schema)), ensure_ascii=False))
    try:
        grammar = llguidance.grammar_from("lark", lenient)
        refused, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except ValueError as exc:
        refused, messages = True, [str(exc)]
    if not refused:
        log.info(
            "tool %r: its calls are held without what llguidance does not implement in its "
            "arguments' schema (%s)",
            name,
            "; ".join(first_line(m) for m in messages),
        )
        return "lenient"
    log.info(
        "tool %r: its arguments are held to any JSON object, as llguidance cannot use their "
        "schema: %s",
        name,
        first_line(messages[0] if messages else ""),
    )
    return "any_object"


def _arguments_grammar(schema: str) -> str:
    return f"start: arguments\narguments: %json {schema}\n"
