"""The streaming engine every tool-call format shares.

Text goes in as it is generated; :class:`ToolCallStream` hands back content deltas and call
events. Text that may be the start of an opening marker is held back until the next piece shows
what it is, as :mod:`backends.engine.stops` does for stop strings, so a call's text never shows as
content. A block that turns out not to be a call (malformed JSON, an unknown key, a list with
no calls, an output cut inside it) is released as content, marker included, and the text after
its marker is read again as ordinary text: nothing is lost and nothing raises.

Whitespace that only separates a call from the start or end of the output, or from another
call, is not content (a Qwen reply of two calls on their own lines has no content).

By default a call is announced only once its block is complete and valid, so streaming gives
exactly what :meth:`ToolParser.extract` gives, however the text is split. With
``stream_arguments=True`` a call is announced as soon as its name is read, and its arguments
stream as they are generated (when the name comes first and the arguments are an object). A
call cannot be taken back once announced: if its block then breaks, the calls announced keep
what they have, and the text after the break is read as ordinary text.

With ``calls_held=True`` a grammar holds every call block to valid calls (a forced call, or
``tool_choice="auto"``'s lazy grammar from the marker on), so a block the output ends inside
is a call that did not fit, not prose: its finished calls stand, the call it ended in is a
:class:`FailedCall`, and none of its text is content (nor the whitespace before its marker).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from backends.chat.parsers.call_block import CallBlock
from backends.chat.parsers.holdback import WHITESPACE, partial_marker_suffix, trailing_whitespace
from backends.chat.parsers.types import (
    CUT,
    ContentDelta,
    FailedCall,
    ParserEvent,
    ToolCallArgumentsDelta,
    ToolCallStart,
)


class CallFormat(Protocol):
    """What the stream needs of a tool-call format (a :class:`ToolParser` is one): where calls
    begin, and a parser for what follows a marker."""

    @property
    def markers(self) -> Sequence[str]: ...

    @property
    def boundary_markers(self) -> Sequence[str]: ...

    def open_block(self, marker: str) -> CallBlock: ...


class ToolCallStream:
    """One output's parser state: ``feed`` each decoded piece in order, then ``finish`` once."""

    def __init__(
        self, parser: CallFormat, *, stream_arguments: bool = False, calls_held: bool = False
    ) -> None:
        self._parser = parser
        self._incremental = stream_arguments
        self._held_calls = calls_held
        self._held = ""  # unreleased content: trailing whitespace, maybe the start of a marker
        self._content_since_call = False  # non-space content since the start or the last call
        self._after_call = False  # a call was the last thing read (whitespace aside)
        self._any_content = False
        self._next_index = 0
        # The open block, if any.
        self._block: CallBlock | None = None
        self._marker = ""
        self._marker_ws = ""  # whitespace before the marker: dropped if the block holds calls
        self._raw = ""  # the block's text read so far (after the marker)
        self._ids: list[int] = []  # indices of the block's calls announced so far
        self._sent: list[int] = []  # characters of their arguments sent so far

    def feed(self, text: str) -> list[ParserEvent]:
        out: list[ParserEvent] = []
        self._run(text, out)
        return out

    def finish(self, cut_reason: str = CUT) -> list[ParserEvent]:
        """The output ended: settle the open block and release what was held back.
        ``cut_reason``: why a held call the output ended inside failed."""
        out: list[ParserEvent] = []
        while self._block is not None:
            self._block.finish()
            if self._block.status == "done":
                self._announce(out, whole=True)
                self._close()
            elif self._held_calls:
                self._cut(out, cut_reason)
            else:
                self._run(self._broken(out, ""), out)
        held, self._held = self._held, ""
        if not (self._after_call and not held.strip(WHITESPACE)):
            self._content(held, out)
        return out

    def _run(self, text: str, out: list[ParserEvent]) -> None:
        while text:
            if self._block is None:
                text = self._scan_content(text, out)
            else:
                text = self._feed_block(text, out)

    # -- content ------------------------------------------------------------------------------

    def _scan_content(self, text: str, out: list[ParserEvent]) -> str:
        """Release the content of ``held + text`` up to the first marker and open its block,
        returning the text after the marker; or hold back what may start a marker."""
        work = self._held + text
        self._held = ""
        found = self._find_marker(work)
        if found is not None:
            at, marker = found
            ws = trailing_whitespace(work[:at])
            self._content(work[: at - ws], out)
            self._open_block(marker, work[at - ws : at])
            return work[at + len(marker) :]
        keep = self._holdback(work)
        self._content(work[: len(work) - keep], out)
        self._held = work[len(work) - keep :]
        return ""

    def _find_marker(self, work: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for marker in self._parser.markers:
            at = work.find(marker)
            if at >= 0 and (best is None or (at, -len(marker)) < (best[0], -len(best[1]))):
                best = (at, marker)
        start = self._boundary_start(work)
        if start is not None and (best is None or start < best[0]):
            for marker in self._parser.boundary_markers:
                if work.startswith(marker, start):
                    return start, marker
        return best

    def _boundary_start(self, work: str) -> int | None:
        """Where a marker that must open the output (or follow a call) could be: the first
        non-space character, if no content came since the start or the last call."""
        if self._content_since_call or not self._parser.boundary_markers:
            return None
        stripped = work.lstrip(WHITESPACE)
        return len(work) - len(stripped) if stripped else None

    def _holdback(self, work: str) -> int:
        keep = partial_marker_suffix(work, self._parser.markers)
        start = self._boundary_start(work)
        if start is not None:
            rest = work[start:]
            if any(m.startswith(rest) for m in self._parser.boundary_markers):
                keep = max(keep, len(rest))
        return keep + trailing_whitespace(work[: len(work) - keep])

    def _content(self, text: str, out: list[ParserEvent]) -> None:
        if self._after_call and not self._any_content:
            text = text.lstrip(WHITESPACE)  # only calls came before: the gap is not content
        if not text:
            return
        out.append(ContentDelta(text))
        self._any_content = True
        if text.strip(WHITESPACE):
            self._content_since_call = True
            self._after_call = False

    # -- blocks -------------------------------------------------------------------------------

    def _open_block(self, marker: str, marker_ws: str) -> None:
        self._block = self._parser.open_block(marker)
        self._marker = marker
        self._marker_ws = marker_ws
        self._raw = ""
        self._ids = []
        self._sent = []

    def _feed_block(self, text: str, out: list[ParserEvent]) -> str:
        assert self._block is not None
        n = self._block.feed(text)
        self._raw += text[:n]
        status = self._block.status
        if status == "done" or self._incremental:
            self._announce(out, whole=status == "done")
        if status == "done":
            self._close()
            return text[n:]
        if status == "error":
            return self._broken(out, text[n:])
        return ""

    def _close(self) -> None:
        self._block = None
        self._after_call = True
        self._content_since_call = False

    def _broken(self, out: list[ParserEvent], rest: str) -> str:
        """The open block is not a call: release its marker as content and return its text, to
        be read again. Calls already announced stay; then only ``rest`` is read again."""
        if self._ids:
            self._close()
            return rest
        self._block = None
        self._content(self._marker_ws + self._marker, out)
        return self._raw + rest

    def _cut(self, out: list[ParserEvent], reason: str) -> None:
        """The output ended inside a block a grammar held: the calls it finished are calls,
        the one it ended in (or a block cut before its first call) a failed call."""
        assert self._block is not None
        calls = self._block.calls
        whole = next((k for k, c in enumerate(calls) if c.arguments is None), len(calls))
        self._announce(out, whole=True, upto=whole)
        if whole < len(calls) or not calls:
            out.append(FailedCall(calls[whole].name if calls else None, reason))
        self._close()

    def _announce(self, out: list[ParserEvent], *, whole: bool, upto: int | None = None) -> None:
        """Emit the block's calls that can be shown now (the first ``upto``), and their new
        argument text.

        ``whole``: the block is complete and valid. Otherwise (``stream_arguments``) a call
        shows once its name is read and its arguments can stream, or once it is complete."""
        assert self._block is not None
        for k, call in enumerate(self._block.calls[:upto]):
            if k == len(self._ids):
                can_stream = call.arguments is not None or call.streamable
                if call.name is None or not (whole or can_stream):
                    return
                self._ids.append(self._next_index)
                self._sent.append(0)
                self._next_index += 1
                out.append(ToolCallStart(self._ids[k], call.name, call.id))
            text = call.arguments if call.arguments is not None else call.streamed
            if len(text) > self._sent[k]:
                out.append(ToolCallArgumentsDelta(self._ids[k], text[self._sent[k] :]))
                self._sent[k] = len(text)
            if call.arguments is None:
                return  # the next call cannot have begun before this one ends
