"""One choice's visible text split into what each API family reports: the answer, the model's
thinking, and its tool calls.

Runs on the event loop, on the text the owner thread has already cleared of stop strings: the
reasoning parser first (``<think>...</think>``), then the tool-call parser on what is left.
Every door (chat completions, Responses, Messages) reads the same split, streamed or whole.
Where a grammar holds the calls, one the output ended inside is reported as a failed call
(:class:`FailedCall`), never as content.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.chat.parsers import (
    CUT,
    ContentDelta,
    FailedCall,
    ReasoningDelta,
    ReasoningParser,
    ReasoningStream,
    ToolCallArgumentsDelta,
    ToolCallStart,
    ToolCallStream,
    ToolParser,
)


@dataclass(frozen=True)
class CallDelta:
    """Part of tool call ``index``: its start (``id`` and ``name`` set), or more arguments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class ToolCallResult:
    id: str
    name: str
    arguments: str  # a JSON object, as the model wrote it


@dataclass(frozen=True)
class OutputDelta:
    """What a piece of text turned out to be."""

    content: str = ""
    reasoning: str = ""
    calls: tuple[CallDelta, ...] = ()
    failed: tuple[FailedCall, ...] = ()  # only when the output ends


class ChatOutput:
    """Feed one choice's text in order, then ``finish`` once. ``calls_held``: a grammar holds
    the calls the model writes (see :mod:`backends.chat.parsers.tool_stream`)."""

    def __init__(
        self,
        tools: ToolParser | None,
        reasoning: ReasoningParser | None,
        starts_in_reasoning: bool = False,
        *,
        calls_held: bool = False,
    ) -> None:
        self._parser = tools
        self._tools: ToolCallStream | None = (
            tools.stream(calls_held=calls_held) if tools is not None else None
        )
        self._reasoning: ReasoningStream | None = (
            reasoning.stream(starts_in_reasoning=starts_in_reasoning)
            if reasoning is not None
            else None
        )
        self.calls: dict[int, ToolCallResult] = {}
        self.failed: list[FailedCall] = []

    def feed(self, text: str) -> OutputDelta:
        if self._reasoning is None:
            return self._content(text, final=None)
        return self._split(self._reasoning.feed(text), final=None)

    def finish(self, cut_reason: str = CUT) -> OutputDelta:
        """The output ended; ``cut_reason`` says how, for a held call it ended inside."""
        if self._reasoning is None:
            return self._content("", final=cut_reason)
        return self._split(self._reasoning.finish(), final=cut_reason)

    def _split(
        self, events: list[ContentDelta | ReasoningDelta], *, final: str | None
    ) -> OutputDelta:
        reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        text = "".join(e.text for e in events if isinstance(e, ContentDelta))
        rest = self._content(text, final=final)
        return OutputDelta(rest.content, reasoning, rest.calls, rest.failed)

    def _content(self, text: str, *, final: str | None) -> OutputDelta:
        """``final``: the output ended (the reason a held call it ended inside failed)."""
        if self._tools is None or self._parser is None:
            return OutputDelta(text)
        events = self._tools.feed(text) if text else []
        if final is not None:
            events += self._tools.finish(final)
        content: list[str] = []
        calls: list[CallDelta] = []
        failed: list[FailedCall] = []
        for event in events:
            if isinstance(event, FailedCall):
                failed.append(event)
                self.failed.append(event)
            elif isinstance(event, ContentDelta):
                content.append(event.text)
            elif isinstance(event, ToolCallStart):
                # The model's own id when it wrote one, else one its templates accept.
                call = ToolCallResult(event.id or self._parser.new_call_id(), event.name, "")
                self.calls[event.index] = call
                calls.append(CallDelta(event.index, call.id, call.name))
            elif isinstance(event, ToolCallArgumentsDelta):
                call = self.calls[event.index]
                self.calls[event.index] = ToolCallResult(
                    call.id, call.name, call.arguments + event.text
                )
                calls.append(CallDelta(event.index, arguments=event.text))
        return OutputDelta("".join(content), "", tuple(calls), tuple(failed))
