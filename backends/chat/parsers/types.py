"""What the parsers hand back: calls, content and reasoning, whole or as stream events."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """One call the model made. ``arguments`` is a JSON object as a string, as the model wrote
    it (its own spacing is kept, so a streamed call and a whole one give the same string);
    ``id`` is the call's id when the model wrote one (Mistral's)."""

    name: str
    arguments: str
    id: str | None = None


# Why a held call failed when nothing more specific is known (the core says how it ended).
CUT = "the output ended inside the call"


@dataclass(frozen=True)
class FailedCall:
    """A call the model opened under a tool-call grammar (a forced call, or ``auto``'s lazy
    grammar) that the output ended inside: not a call, and its text not content either.
    ``name`` is the tool it names, if the name was read; ``reason`` says why it failed.

    It is also the stream's event for it, sent when the output ends."""

    name: str | None
    reason: str = CUT


@dataclass(frozen=True)
class ParsedOutput:
    """A whole output split into the text meant for the user, the calls, and the calls that
    failed (:class:`FailedCall`)."""

    content: str
    calls: list[ToolCall] = field(default_factory=list)
    failed: list[FailedCall] = field(default_factory=list)

    @staticmethod
    def from_events(events: Iterable[ParserEvent]) -> ParsedOutput:
        """Put a stream's events back together (what a client sees once the stream ended)."""
        content: list[str] = []
        names: dict[int, str] = {}
        ids: dict[int, str | None] = {}
        arguments: dict[int, list[str]] = {}
        failed: list[FailedCall] = []
        for event in events:
            if isinstance(event, FailedCall):
                failed.append(event)
            elif isinstance(event, ContentDelta):
                content.append(event.text)
            elif isinstance(event, ToolCallStart):
                names[event.index] = event.name
                ids[event.index] = event.id
                arguments[event.index] = []
            elif isinstance(event, ToolCallArgumentsDelta):
                arguments[event.index].append(event.text)
        calls = [ToolCall(names[i], "".join(arguments[i]), ids[i]) for i in sorted(names)]
        return ParsedOutput("".join(content), calls, failed)


@dataclass(frozen=True)
class ContentDelta:
    """Text for the user (not a call, not reasoning)."""

    text: str


@dataclass(frozen=True)
class ToolCallStart:
    """Call ``index`` (0, 1, ... over the whole output) to ``name`` begins; ``id`` is the id
    the model wrote for it, if it wrote one before the call was announced."""

    index: int
    name: str
    id: str | None = None


@dataclass(frozen=True)
class ToolCallArgumentsDelta:
    """More of call ``index``'s arguments; a call's deltas concatenate to its ``arguments``."""

    index: int
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """More of the model's thinking."""

    text: str


ParserEvent = ContentDelta | ToolCallStart | ToolCallArgumentsDelta | FailedCall
ReasoningEvent = ReasoningDelta | ContentDelta


@dataclass(frozen=True)
class ReasoningOutput:
    """A whole output split into thinking and the rest (which may still hold calls)."""

    reasoning: str
    content: str

    @staticmethod
    def from_events(events: Iterable[ReasoningEvent]) -> ReasoningOutput:
        seen = list(events)
        reasoning = "".join(e.text for e in seen if isinstance(e, ReasoningDelta))
        content = "".join(e.text for e in seen if isinstance(e, ContentDelta))
        return ReasoningOutput(reasoning, content)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name and the JSON schema of its arguments."""

    name: str
    parameters: Mapping[str, Any] | None = None


def tool_specs(tools: Sequence[Mapping[str, Any]]) -> list[ToolSpec]:
    """Tools as the OpenAI API gives them (``{"type": "function", "function": {...}}``, or the
    bare function object) to :class:`ToolSpec`."""
    specs: list[ToolSpec] = []
    for tool in tools:
        function = tool.get("function", tool)
        specs.append(ToolSpec(str(function["name"]), function.get("parameters")))
    return specs
