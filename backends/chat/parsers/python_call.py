"""Llama 3.1's built-in tool calls: a Python call after ``<|python_tag|>``::

    <|python_tag|>brave_search.call(query="weather in Paris")

Meta's template writes a built-in tool's call this way (``name.call(key="value", ...)``) and
the model answers in kind when the system prompt lists built-in tools. The call becomes
``brave_search`` with the arguments ``{"query": "weather in Paris"}``. Only keyword arguments
whose values are Python literals (strings, numbers, booleans, None, lists and dicts of them)
are read; anything else (raw code for ``code_interpreter``, a call with positional arguments)
is not a call and stays text.
"""

from __future__ import annotations

import ast
import json

from backends.chat.parsers.call_bodies import WS, Body, PendingCall
from backends.chat.parsers.json_scan import ScanStatus

MAX_CALL = 64 * 1024  # characters: a built-in call is a line, not a program


class PythonCall(Body):
    """``name.call(k=v, ...)``: read to its closing parenthesis (outside strings), then parsed
    with Python's own parser."""

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.call = PendingCall()
        self.calls = [self.call]
        self._text = ""
        self._depth = 0  # open brackets, the call's own parenthesis included
        self._quote = ""  # the quote of the string being read, if any
        self._escaped = False

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while i < n and self.status == "open":
            c = text[i]
            if not self._text and c in WS:
                i += 1
                continue
            self._text += c
            i += 1
            if len(self._text) > MAX_CALL:
                self.status = "error"
            elif self._quote:
                self._read_string(c)
            elif c in "'\"":
                self._quote = c
            elif c in "([{":
                self._depth += 1
            elif c in ")]}":
                self._depth -= 1
                if self._depth == 0:
                    self._end()
            elif self._depth == 0 and not (c.isalnum() or c in "_."):
                self.status = "error"  # before the "(": only the name and ".call"
        return i

    def _read_string(self, c: str) -> None:
        if self._escaped:
            self._escaped = False
        elif c == "\\":
            self._escaped = True
        elif c == self._quote:
            self._quote = ""

    def _end(self) -> None:
        parsed = parse_call(self._text)
        if parsed is None:
            self.status = "error"
            return
        self.call.name, self.call.arguments = parsed
        self.status = "done"


def parse_call(text: str) -> tuple[str, str] | None:
    """``(name, arguments as a JSON object)`` for ``name.call(k=literal, ...)``, else None."""
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not (
        isinstance(tree, ast.Call)
        and isinstance(tree.func, ast.Attribute)
        and tree.func.attr == "call"
        and isinstance(tree.func.value, ast.Name)
        and not tree.args
    ):
        return None
    arguments = {}
    try:
        for keyword in tree.keywords:
            if keyword.arg is None:  # **kwargs
                return None
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        encoded = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None  # not a literal, or not one JSON can hold (a set, bytes, nan)
    return tree.func.value.id, encoded


class JsonOrPythonCall(Body):
    """After ``<|python_tag|>``: a JSON call object, or a built-in tool's Python call."""

    def __init__(self, json_call: Body) -> None:
        self.status: ScanStatus = "open"
        self.calls: list[PendingCall] = []
        self._json = json_call
        self._inner: Body | None = None

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while self._inner is None and i < n and text[i] in WS:
            i += 1
        if self._inner is None and i < n:
            self._inner = self._json if text[i] == "{" else PythonCall()
        if self._inner is not None:
            i = self._inner.feed(text, i)
            self.calls = self._inner.calls
            self.status = self._inner.status
        return i

    def finish(self) -> None:
        if self._inner is not None:
            self._inner.finish()
            self.status = self._inner.status
        else:
            super().finish()
