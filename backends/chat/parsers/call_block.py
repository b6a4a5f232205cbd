"""One call block: the text from just after an opening marker to the end of its calls.

A block is a :class:`~backends.chat.parsers.call_bodies.Body` (the calls' JSON), then, for formats
that have one, whitespace and a closing marker (``</tool_call>``). An output that ends after a
complete body but before (or inside) the closing marker still counts: a length limit or a
stop string may cut the marker, and the calls themselves are whole.
"""

from __future__ import annotations

from backends.chat.parsers.call_bodies import WS, Body, PendingCall
from backends.chat.parsers.json_scan import ScanStatus


class CallBlock:
    def __init__(self, body: Body, closer: str | None = None) -> None:
        self.body = body
        self.closer = closer
        self.status: ScanStatus = "open"
        self._closing = ""  # the part of the closing marker read so far

    @property
    def calls(self) -> list[PendingCall]:
        return self.body.calls

    def feed(self, text: str, i: int = 0) -> int:
        """Read from ``text[i]``; return the index after the last character that belongs to the
        block. On ``error`` the returned index is the character that broke it."""
        i = self._feed(text, i)
        if self.status == "done" and not self.calls:
            self.status = "error"  # a block without calls is not a call (never lose its text)
        return i

    def _feed(self, text: str, i: int) -> int:
        if self.body.status == "open":
            i = self.body.feed(text, i)
            body = self._body_status()
            if body == "error":
                self.status = "error"
                return i
            if body == "done" and self.closer is None:
                self.status = "done"
                return i
        n = len(text)
        while i < n and self.status == "open" and self._body_status() == "done":
            assert self.closer is not None
            c = text[i]
            if not self._closing and c in WS:
                i += 1
                continue
            if c != self.closer[len(self._closing)]:
                self.status = "error"
                break
            self._closing += c
            i += 1
            if self._closing == self.closer:
                self.status = "done"
        return i

    def _body_status(self) -> ScanStatus:
        # Read through a call: mypy would keep the status narrowed across ``body.feed``.
        return self.body.status

    def finish(self) -> None:
        """The output ended here."""
        if self.status != "open":
            return
        self.body.finish()
        self.status = "done" if self.body.status == "done" and self.calls else "error"
