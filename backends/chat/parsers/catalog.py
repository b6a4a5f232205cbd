"""Tool-call and reasoning parsers by name, and which ones a model needs.

Names follow vLLM's ``--tool-call-parser`` / ``--reasoning-parser`` where vLLM has the same
format, so a user who knows one server knows the other.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

from backends.chat.parsers.reasoning import MISTRAL_THINK, THINK, ReasoningParser
from backends.chat.parsers.tool_parser import ToolParser

ParserClass = TypeVar("ParserClass", bound=type[ToolParser])

DEEPSEEK_CALLS = "<｜tool▁calls▁begin｜>"
_TOOL_PARSERS: dict[str, type[ToolParser]] = {}  # each format module registers itself
_REASONING_PARSERS: dict[str, ReasoningParser] = {"think": THINK, "mistral": MISTRAL_THINK}


class UnknownParser(ValueError):
    """No parser is registered under that name."""


def register_tool_parser(name: str) -> Callable[[ParserClass], ParserClass]:
    def register(cls: ParserClass) -> ParserClass:
        if name in _TOOL_PARSERS:
            raise ValueError(f"A tool parser is already registered as {name!r}.")
        cls.name = name
        _TOOL_PARSERS[name] = cls
        return cls

    return register


def tool_parser_names() -> list[str]:
    return sorted(_TOOL_PARSERS)


def get_tool_parser(name: str, special_tokens: Mapping[str, int] | None = None) -> ToolParser:
    """The parser registered as ``name``; ``special_tokens`` (text → id) serve its grammars."""
    try:
        cls = _TOOL_PARSERS[name]
    except KeyError:
        raise UnknownParser(
            f"No tool parser is named {name!r}; known: {', '.join(tool_parser_names())}."
        ) from None
    return cls(special_tokens)


def reasoning_parser_names() -> list[str]:
    return sorted(_REASONING_PARSERS)


def get_reasoning_parser(name: str) -> ReasoningParser:
    try:
        return _REASONING_PARSERS[name]
    except KeyError:
        raise UnknownParser(
            f"No reasoning parser is named {name!r}; known: {', '.join(reasoning_parser_names())}."
        ) from None


def choose_tool_parser(
    chat_template: str | None, special_tokens: Collection[str] = ()
) -> str | None:
    """The tool parser for a model, from its chat template and the special/added tokens of its
    vocabulary (their text), or None when the template takes no tools or the format is unknown.

    The first rule that holds wins:

    0. ``<｜tool▁calls▁begin｜>`` is a token or in the template (DeepSeek-V3, R1 and its
       distills, whose templates render past calls but never mention ``tools``):
       ``deepseek_v3``;
    1. the template never mentions ``tools``: None (the model cannot be given tools);
    2. ``[TOOL_CALLS]`` is a token or in the template: ``mistral``;
    3. ``<|tool_call|>`` is a token (Phi-4-mini): ``phi4_mini_json``;
    4. ``<tool_call>`` is in the template (Hermes 2 Pro, Qwen2.5, Qwen3 tell the model to write
       it) or is a token: ``hermes``;
    5. ``<|python_tag|>`` is a token, or the template is a Llama 3 one (``<|start_header_id|>``):
       ``llama3_json``;
    6. otherwise None.
    """
    template = chat_template or ""
    tokens = set(special_tokens)
    if DEEPSEEK_CALLS in tokens or DEEPSEEK_CALLS in template:
        return "deepseek_v3"
    if "tools" not in template:
        return None
    if "[TOOL_CALLS]" in tokens or "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|tool_call|>" in tokens:
        return "phi4_mini_json"
    if "<tool_call>" in template or "<tool_call>" in tokens:
        return "hermes"
    if "<|python_tag|>" in tokens or "<|start_header_id|>" in template:
        return "llama3_json"
    return None


def choose_reasoning_parser(
    chat_template: str | None, special_tokens: Collection[str] = ()
) -> str | None:
    """The reasoning parser for a model, or None for a model that does not reason.

    ``</think>`` in the template or the vocabulary (Qwen3, DeepSeek-R1 distills, Phi-4-reasoning)
    gives ``think``; ``[/THINK]`` (Magistral) gives ``mistral``. A model whose vocabulary has the
    tags but that does not think (Qwen3-Instruct-2507) is still unaffected: the parser only
    splits out a block that opens the output."""
    template = chat_template or ""
    tokens = set(special_tokens)
    if "</think>" in tokens or "</think>" in template:
        return "think"
    if "[/THINK]" in tokens or "[/THINK]" in template:
        return "mistral"
    return None
