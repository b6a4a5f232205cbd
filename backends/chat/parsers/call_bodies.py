"""The JSON shapes a call takes, read a piece at a time.

A *body* is what follows a format's opening marker: one call object, a list of them, or
(Mistral) a bare name then the arguments. Bodies are resumable state machines over
:class:`~backends.chat.parsers.json_scan.JsonScanner`: ``feed(text, i)`` reads from ``text[i]`` and
returns where it stopped; ``status`` turns ``done`` on the body's last character and ``error``
on the first character that cannot belong to it (which is then not read).

Each call in a body is a :class:`PendingCall`. Its name is known as soon as it is read; when the
name comes before the arguments and the arguments are an object, the arguments' text is
``streamable``: it grows character by character and equals the final ``arguments``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from backends.chat.parsers.json_scan import JsonScanner, ScanStatus

WS = " \t\r\n"
ARGUMENT_KEYS = ("arguments", "parameters")  # Llama 3 says "parameters", the others "arguments"
# Keys a call object may carry besides its name and arguments (Mistral adds an id, which is
# kept, some models a type); any other key means this JSON is not a call, which is known
# without reading further.
IGNORED_KEYS = ("id", "type")


@dataclass
class PendingCall:
    name: str | None = None
    arguments: str | None = None  # set once the call is complete and valid
    streamed: str = ""  # the arguments' text read so far, when ``streamable``
    streamable: bool = False
    id: str | None = None  # the call's id, when the model writes one (Mistral)


def loads(text: str) -> tuple[bool, Any]:
    """``json.loads`` that never raises: (ok, value)."""
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def arguments_text(raw: str) -> str | None:
    """The arguments string for a call's raw arguments value, or None if it is not a JSON object.

    Some models (Granite, sometimes Hermes fine-tunes) write the arguments as a string that holds
    the JSON object; the object's text is used then, never the string twice encoded."""
    ok, value = loads(raw)
    if ok and isinstance(value, dict):
        return raw
    if ok and isinstance(value, str):
        inner_ok, inner = loads(value)
        if inner_ok and isinstance(inner, dict):
            return value
    return None


class Body(ABC):
    status: ScanStatus
    calls: list[PendingCall]

    @abstractmethod
    def feed(self, text: str, i: int) -> int: ...

    def finish(self) -> None:
        """The output ended: a body still open can no longer be complete."""
        if self.status == "open":
            self.status = "error"


class CallObject(Body):
    """``{"name": "f", "arguments": {...}}``: keys in any order, ``parameters`` for
    ``arguments``; a string ``id`` is the call's id, a ``type`` is ignored. Missing arguments
    mean ``{}`` when ``arguments_optional`` (a tool without parameters, called after an
    unambiguous marker)."""

    def __init__(self, *, arguments_optional: bool = True) -> None:
        self.status: ScanStatus = "open"
        self.call = PendingCall()
        self.calls = [self.call]
        self._optional = arguments_optional
        self._state = "open"  # open, key, key_or_end, colon, value, after
        self._scanner: JsonScanner | None = None
        self._raw = ""  # the text of the key or value being read
        self._key = ""
        self._raw_arguments: str | None = None

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while i < n and self.status == "open":
            if self._scanner is not None:
                i = self._feed_scanner(text, i)
                continue
            c = text[i]
            state = self._state
            if c in WS:
                pass
            elif state == "open" and c == "{":
                self._state = "key_or_end"
            elif state in ("key", "key_or_end") and c == '"':
                self._start_scan()
                continue  # the scanner reads the opening quote itself
            elif state == "key_or_end" and c == "}":
                self._finish_object()
            elif state == "colon" and c == ":":
                self._state = "value"
            elif state == "value":
                self._start_scan()
                if self._key in ARGUMENT_KEYS and self.call.name is not None and c == "{":
                    self.call.streamable = True
                continue
            elif state == "after" and c == ",":
                self._state = "key"
            elif state == "after" and c == "}":
                self._finish_object()
            else:
                self.status = "error"
                break
            i += 1
        return i

    def _start_scan(self) -> None:
        self._scanner = JsonScanner()
        self._raw = ""

    def _feed_scanner(self, text: str, i: int) -> int:
        assert self._scanner is not None
        j = self._scanner.feed(text, i)
        piece = text[i:j]
        self._raw += piece
        if self.call.streamable and self._state == "value" and self._key in ARGUMENT_KEYS:
            self.call.streamed += piece
        if self._scanner.status == "error":
            self.status = "error"
        elif self._scanner.status == "done":
            self._scanner = None
            if self._state in ("key", "key_or_end"):
                self._end_key()
            else:
                self._end_value()
        return j

    def _end_key(self) -> None:
        _, key = loads(self._raw)
        self._key = str(key)
        known = self._key == "name" or self._key in ARGUMENT_KEYS or self._key in IGNORED_KEYS
        self._state = "colon"
        if not known:
            self.status = "error"

    def _end_value(self) -> None:
        self._state = "after"
        if self._key == "name":
            ok, name = loads(self._raw)
            if self.call.name is not None or not ok or not isinstance(name, str) or not name:
                self.status = "error"
            else:
                self.call.name = name
        elif self._key in ARGUMENT_KEYS:
            if self._raw_arguments is not None:  # both "arguments" and "parameters"
                self.status = "error"
            self._raw_arguments = self._raw
        elif self._key == "id":
            ok, value = loads(self._raw)
            if ok and isinstance(value, str) and value:
                self.call.id = value

    def _finish_object(self) -> None:
        if self.call.name is None:
            self.status = "error"
            return
        if self._raw_arguments is None:
            arguments = "{}" if self._optional else None
        else:
            arguments = arguments_text(self._raw_arguments)
        if arguments is None:
            self.status = "error"
            return
        self.call.arguments = arguments
        self.status = "done"


class CallList(Body):
    """``[call, call, ...]`` with at least one call (Mistral before v11, Phi-4-mini)."""

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.calls = []
        self._state = "open"  # open, first, next, after
        self._current: CallObject | None = None

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while i < n and self.status == "open":
            if self._current is not None:
                i = self._current.feed(text, i)
                if self._current.status == "error":
                    self.status = "error"
                elif self._current.status == "done":
                    self._current = None
                    self._state = "after"
                continue
            c = text[i]
            state = self._state
            if c in WS:
                pass
            elif state == "open" and c == "[":
                self._state = "first"
            elif state in ("first", "next") and c == "{":
                self._current = CallObject()
                self.calls.append(self._current.call)
                continue  # the object reads its own "{"
            elif state == "after" and c == ",":
                self._state = "next"
            elif state == "after" and c == "]":
                self.status = "done"
            else:  # includes "[]": a list without calls is not a call
                self.status = "error"
                break
            i += 1
        return i


class ListOrObject(Body):
    """A list of calls, or one bare call object: whichever the first character says."""

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.calls = []
        self._inner: Body | None = None

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while self._inner is None and i < n and text[i] in WS:
            i += 1
        if self._inner is None and i < n:
            if text[i] == "[":
                self._inner = CallList()
            elif text[i] == "{":
                self._inner = CallObject()
            else:
                self.status = "error"
                return i
        if self._inner is not None:
            i = self._inner.feed(text, i)
            self.calls = self._inner.calls
            self.status = self._inner.status
        return i
