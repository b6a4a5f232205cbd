"""Thinking split out of the output: ``<think>…</think>`` (Qwen3, DeepSeek-R1 distills,
Phi-4-reasoning) and ``[THINK]…[/THINK]`` (Magistral).

A thinking block counts only where it opens the output (whitespace aside), so a model that does
not reason, or an answer that merely mentions the tag, is left alone. Some templates open the
block themselves (DeepSeek-R1 distills end the prompt with ``<think>\\n``): the output then
starts inside the thinking and only the end tag appears; :meth:`ReasoningParser.opened_by`
tells from the rendered prompt. An output that never closes its block is all reasoning.

Whitespace around the thinking, and between it and the answer, belongs to neither. Streaming
holds back what may be the start of the end tag, as :mod:`backends.engine.stops` does for stop
strings, so a tag never shows, and gives the same split as :meth:`ReasoningParser.extract`
however the text is split. The content events can go straight on to a tool-call stream.
"""

from __future__ import annotations

from collections.abc import Mapping

from backends.chat.parsers.holdback import WHITESPACE, partial_marker_suffix, trailing_whitespace
from backends.chat.parsers.types import (
    ContentDelta,
    ReasoningDelta,
    ReasoningEvent,
    ReasoningOutput,
)


class ReasoningParser:
    def __init__(self, start: str, end: str) -> None:
        self.start = start
        self.end = end

    def kept_tokens(self, special_tokens: Mapping[str, int]) -> dict[int, str]:
        """Id → text of the tags that are special tokens in this vocabulary: a decoder that
        drops special tokens must write these back (see ``ToolParser.kept_tokens``)."""
        tags = (self.start, self.end)
        return {special_tokens[t]: t for t in tags if t in special_tokens}

    def opened_by(self, prompt: str) -> bool:
        """Whether the rendered prompt ends inside an open thinking block, so that the output
        starts in it (pass the result as ``starts_in_reasoning``)."""
        return prompt.rstrip(WHITESPACE).endswith(self.start)

    def extract(self, text: str, *, starts_in_reasoning: bool = False) -> ReasoningOutput:
        stream = self.stream(starts_in_reasoning=starts_in_reasoning)
        return ReasoningOutput.from_events(stream.feed(text) + stream.finish())

    def stream(self, *, starts_in_reasoning: bool = False) -> ReasoningStream:
        return ReasoningStream(self, starts_in_reasoning=starts_in_reasoning)


class ReasoningStream:
    """One output: ``feed`` each decoded piece in order, then ``finish`` once."""

    def __init__(self, parser: ReasoningParser, *, starts_in_reasoning: bool = False) -> None:
        self._start = parser.start
        self._end = parser.end
        self._opened = starts_in_reasoning
        self._state = "start"  # start, reasoning, content
        self._held = ""
        self._reasoned = False  # some reasoning text was emitted
        self._trim_content = False  # drop the whitespace between the thinking and the answer

    def feed(self, text: str) -> list[ReasoningEvent]:
        out: list[ReasoningEvent] = []
        self._run(text, out)
        return out

    def finish(self) -> list[ReasoningEvent]:
        out: list[ReasoningEvent] = []
        held, self._held = self._held, ""
        if self._state == "start":
            if self._opened:
                self._reasoning(held.rstrip(WHITESPACE), out)
            elif held:
                out.append(ContentDelta(held))
        elif self._state == "reasoning":
            self._reasoning(held.rstrip(WHITESPACE), out)
        return out

    def _run(self, text: str, out: list[ReasoningEvent]) -> None:
        if self._state == "start":
            text = self._read_start(text, out)
        if self._state == "reasoning" and text:
            text = self._read_reasoning(text, out)
        if self._state == "content" and text:
            self._content(text, out)

    def _read_start(self, text: str, out: list[ReasoningEvent]) -> str:
        """Before anything but whitespace: is this the opening tag? Returns the text left."""
        work = self._held + text
        body = work.lstrip(WHITESPACE)
        if body.startswith(self._start):
            self._held = ""
            self._state = "reasoning"
            return body[len(self._start) :]
        if self._start.startswith(body):  # may still become the tag: wait
            self._held = work
            return ""
        self._held = ""
        self._state = "reasoning" if self._opened else "content"
        return work

    def _read_reasoning(self, text: str, out: list[ReasoningEvent]) -> str:
        work = self._held + text
        at = work.find(self._end)
        if at >= 0:
            self._held = ""
            self._reasoning(work[:at].rstrip(WHITESPACE), out)
            self._state = "content"
            self._trim_content = True
            return work[at + len(self._end) :]
        keep = partial_marker_suffix(work, (self._end,))
        keep += trailing_whitespace(work[: len(work) - keep])
        self._held = work[len(work) - keep :]
        self._reasoning(work[: len(work) - keep], out)
        return ""

    def _reasoning(self, text: str, out: list[ReasoningEvent]) -> None:
        if not self._reasoned:
            text = text.lstrip(WHITESPACE)
        if text:
            out.append(ReasoningDelta(text))
            self._reasoned = True

    def _content(self, text: str, out: list[ReasoningEvent]) -> None:
        if self._trim_content:
            text = text.lstrip(WHITESPACE)
            if not text:
                return
            self._trim_content = False
        out.append(ContentDelta(text))


THINK = ReasoningParser("<think>", "</think>")
MISTRAL_THINK = ReasoningParser("[THINK]", "[/THINK]")
