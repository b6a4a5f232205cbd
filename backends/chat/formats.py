"""How a model writes tool calls and its thinking: the parsers for its output, read off its chat
template and vocabulary (or as configured), and the marker tokens to keep as text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from backends.chat.parsers import (
    ReasoningParser,
    ToolParser,
    UnknownParser,
    choose_reasoning_parser,
    choose_tool_parser,
    get_reasoning_parser,
    get_tool_parser,
)
from backends.errors import StartupError
from backends.models.folder import ModelFolder


@dataclass(frozen=True)
class ChatFormat:
    """A model's tool-call and reasoning formats (either may be absent).

    ``kept_tokens`` are the formats' markers that are special tokens of the vocabulary, id →
    text: onnxruntime-genai's decoder drops special tokens, so generation writes these back
    into the text, or the calls and the thinking could not be found in it."""

    tools: ToolParser | None = None
    reasoning: ReasoningParser | None = None
    kept_tokens: Mapping[int, str] = field(default_factory=dict)

    def select(self, *, tools: bool, reasoning: bool) -> ChatFormat | None:
        """The parsers one request's output needs: calls when it offered tools, thinking when
        its door reports it apart; None when it needs neither."""
        chosen = ChatFormat(
            self.tools if tools else None, self.reasoning if reasoning else None, self.kept_tokens
        )
        return chosen if chosen.tools or chosen.reasoning else None


def chat_format(folder: ModelFolder, tool_parser: str, reasoning_parser: str) -> ChatFormat:
    """The formats by name ("auto": from the template, "none": none); an unknown name stops
    the start with a clear message."""
    template = folder.chat_templates.get("tool_use") or folder.chat_templates.get("default")
    ids = {text: token for text, (token, _) in folder.added_tokens.items()}
    if tool_parser == "auto":
        tool_parser = choose_tool_parser(template, ids) or "none"
    if reasoning_parser == "auto":
        reasoning_parser = choose_reasoning_parser(template, ids) or "none"
    try:
        tools = get_tool_parser(tool_parser, ids) if tool_parser != "none" else None
        reasoning = get_reasoning_parser(reasoning_parser) if reasoning_parser != "none" else None
    except UnknownParser as exc:
        raise StartupError(str(exc)) from None
    kept = {
        **(tools.kept_tokens() if tools else {}),
        **(reasoning.kept_tokens(ids) if reasoning else {}),
    }
    return ChatFormat(tools, reasoning, kept)
