"""A JSON value read a piece at a time: is it still valid, and where does it end?

Tool calls are JSON inside free text, streamed a few characters at a time, so the parsers must
know, without waiting for the rest, whether what arrived can still become valid JSON and where
a value ends (a ``}`` inside a string ends nothing). Re-parsing the whole value with ``json`` at
every piece would cost quadratic time on long arguments, hence this resumable scanner. It is
strict RFC 8259: no NaN, no trailing commas, no single quotes, no control characters in strings.
"""

from __future__ import annotations

import re
from typing import Literal

ScanStatus = Literal["open", "done", "error"]

_WS = " \t\r\n"
_PLAIN_STRING = re.compile(r'[^"\\\x00-\x1f]+')
_HEX = "0123456789abcdefABCDEF"
_DIGITS = "0123456789"

# What the scanner expects next.
_VALUE = 0  # any value (whitespace first)
_OBJECT_FIRST = 1  # a key or "}" right after "{"
_OBJECT_KEY = 2  # a key after ","
_COLON = 3
_ARRAY_FIRST = 4  # a value or "]" right after "["
_AFTER_VALUE = 5  # "," or the closing bracket
_STRING = 6
_ESCAPE = 7  # the character after a backslash
_UNICODE = 8  # the hex digits of \uXXXX
_LITERAL = 9  # the rest of true / false / null
# Numbers: the state says what has been read so far.
_MINUS = 10
_ZERO = 11
_INTEGER = 12
_POINT = 13
_FRACTION = 14
_EXP_MARK = 15
_EXP_SIGN = 16
_EXPONENT = 17

_NUMBER_END_OK = {_ZERO, _INTEGER, _FRACTION, _EXPONENT}
_LITERALS = {"t": "rue", "f": "alse", "n": "ull"}


class JsonScanner:
    """Feed the text of one JSON value in pieces; ``status`` says whether it is still open,
    ended (``done``) or can no longer be valid (``error``).

    >>> s = JsonScanner()
    >>> s.feed('{"a": "}"', 0), s.status
    (9, 'open')
    >>> s.feed('} tail', 0), s.status
    (1, 'done')
    """

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.first: str | None = None  # the value's first character: which kind of value it is
        self._state = _VALUE
        self._stack: list[str] = []  # open "{" and "["
        self._in_key = False  # the string being read is an object key
        self._pending = ""  # the rest of a literal, or how many hex digits are left (as "x"s)

    def feed(self, text: str, start: int = 0) -> int:
        """Read ``text[start:]`` until the value ends or turns invalid; return the index after
        the last character read. A character that ends a number is not read (it belongs to
        what follows); on an error, the offending character is not read either."""
        i, n = start, len(text)
        while i < n and self.status == "open":
            c = text[i]
            state = self._state
            if state == _STRING:
                plain = _PLAIN_STRING.match(text, i)
                if plain:
                    i = plain.end()
                    continue
                if c == '"':
                    if self._in_key:
                        self._in_key = False
                        self._state = _COLON
                    else:
                        self._close_value()
                elif c == "\\":
                    self._state = _ESCAPE
                else:  # a raw control character
                    self.status = "error"
                    break
            elif state in (_VALUE, _ARRAY_FIRST):
                if c in _WS:
                    pass
                elif state == _ARRAY_FIRST and c == "]":
                    self._stack.pop()
                    self._close_value()
                elif not self._start_value(c):
                    break
            elif state in (_OBJECT_FIRST, _OBJECT_KEY):
                if c in _WS:
                    pass
                elif c == '"':
                    self._in_key = True
                    self._state = _STRING
                elif state == _OBJECT_FIRST and c == "}":
                    self._stack.pop()
                    self._close_value()
                else:
                    self.status = "error"
                    break
            elif state == _COLON:
                if c == ":":
                    self._state = _VALUE
                elif c not in _WS:
                    self.status = "error"
                    break
            elif state == _AFTER_VALUE:
                if c in _WS:
                    pass
                elif c == ",":
                    self._state = _OBJECT_KEY if self._stack[-1] == "{" else _VALUE
                elif c == ("}" if self._stack[-1] == "{" else "]"):
                    self._stack.pop()
                    self._close_value()
                else:
                    self.status = "error"
                    break
            elif state == _ESCAPE:
                if c == "u":
                    self._pending = "xxxx"
                    self._state = _UNICODE
                elif c in '"\\/bfnrt':
                    self._state = _STRING
                else:
                    self.status = "error"
                    break
            elif state == _UNICODE:
                if c not in _HEX:
                    self.status = "error"
                    break
                self._pending = self._pending[1:]
                if not self._pending:
                    self._state = _STRING
            elif state == _LITERAL:
                if c != self._pending[0]:
                    self.status = "error"
                    break
                self._pending = self._pending[1:]
                if not self._pending:
                    self._close_value()
            else:  # inside a number
                if not self._number_char(c):
                    continue  # the number ended before c: read c again (unless it broke)
            i += 1
        return i

    def finish(self) -> None:
        """The text ended: a bare top-level number is complete now; anything open is an error."""
        if self.status == "open":
            ends_number = self._state in _NUMBER_END_OK and not self._stack
            self.status = "done" if ends_number else "error"

    def _start_value(self, c: str) -> bool:
        if self.first is None:
            self.first = c
        if c == "{":
            self._stack.append("{")
            self._state = _OBJECT_FIRST
        elif c == "[":
            self._stack.append("[")
            self._state = _ARRAY_FIRST
        elif c == '"':
            self._state = _STRING
        elif c == "-":
            self._state = _MINUS
        elif c == "0":
            self._state = _ZERO
        elif c in _DIGITS:
            self._state = _INTEGER
        elif c in _LITERALS:
            self._pending = _LITERALS[c]
            self._state = _LITERAL
        else:
            self.status = "error"
            return False
        return True

    def _close_value(self) -> None:
        if self._stack:
            self._state = _AFTER_VALUE
        else:
            self.status = "done"

    def _number_char(self, c: str) -> bool:
        """Read one character of a number; False if it is not part of the number (the number
        then ended, or it is an error when the number was incomplete)."""
        state = self._state
        digit = c in _DIGITS
        if state == _MINUS:
            nxt = _ZERO if c == "0" else _INTEGER if digit else None
        elif state in (_ZERO, _INTEGER):
            if digit and state == _INTEGER:
                nxt = _INTEGER
            elif c == ".":
                nxt = _POINT
            elif c in "eE":
                nxt = _EXP_MARK
            else:
                nxt = None
        elif state in (_POINT, _FRACTION):
            nxt = _FRACTION if digit else _EXP_MARK if (c in "eE" and state == _FRACTION) else None
        elif state == _EXP_MARK:
            nxt = _EXPONENT if digit else _EXP_SIGN if c in "+-" else None
        else:  # _EXP_SIGN, _EXPONENT
            nxt = _EXPONENT if digit else None
        if nxt is not None:
            self._state = nxt
            return True
        if state in _NUMBER_END_OK:
            self._close_value()
        else:
            self.status = "error"
        return False
