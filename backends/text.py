"""Text a tokenizer can read: the one check each model's core makes where a client's text
enters it.

A JSON string can hold what is not Unicode text: a lone surrogate (``"\\ud800"`` with no pair,
or its three bytes raw in the body, which Python's JSON reader lets through). No tokenizer
encodes one: onnxruntime-genai's and Hugging Face's raise ``TypeError``. onnxruntime-genai's
tokenizer also takes a C string, so a NUL would end the text there, silently: the generators'
and Whisper's cores refuse it too (``nul=True``); Hugging Face's tokenizers read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backends.errors import InvalidRequest


@dataclass(frozen=True)
class Unreadable:
    """The first character of a text that a tokenizer cannot read."""

    where: str  # "" for the text itself, else its place inside a value: "content.0.text"
    at: int  # its index in that text
    char: str

    def describe(self, field: str, within: str = "") -> list[str]:
        """A sentence, in parts: ``field`` holds what, where (``within`` a part of it, then
        ``where``). ``field`` stays a part of its own (a :class:`~backends.errors.Field` the
        door renames)."""
        if self.char == "\x00":
            what, why = "a NUL character (U+0000)", "the model's tokenizer would end the text there"
        else:
            what = f"a lone surrogate (U+{ord(self.char):04X})"
            why = "it is not Unicode text (half of a pair, alone) and cannot be encoded"
        place = " ".join(p for p in (within, self.where) if p)
        inside = f" in {place}" if place else ""
        return [field, f" holds {what} at character {self.at}{inside}: {why}."]


def unreadable(text: str, *, nul: bool) -> Unreadable | None:
    """The first character of ``text`` no tokenizer reads (a NUL too, with ``nul``), or None."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return Unreadable("", exc.start, text[exc.start])
    if nul and "\x00" in text:
        return Unreadable("", text.index("\x00"), "\x00")
    return None


def find_unreadable(value: Any, *, nul: bool, where: str = "") -> Unreadable | None:
    """The first unreadable character in any string of ``value`` (strings, mapping keys and
    values, sequences, nested), with its place."""
    if isinstance(value, str):
        found = unreadable(value, nul=nul)
        return Unreadable(where, found.at, found.char) if found else None
    if isinstance(value, Mapping):
        pairs = [(_label(str(k)), v) for k, v in value.items()]
        keys = [(f"{name} (a key)", k) for (name, _), k in zip(pairs, value, strict=True)]
        return _first([item for pair in zip(keys, pairs, strict=True) for item in pair], nul, where)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return _first([(str(i), v) for i, v in enumerate(value)], nul, where)
    return None


def _first(items: list[tuple[str, Any]], nul: bool, where: str) -> Unreadable | None:
    for name, item in items:
        found = find_unreadable(item, nul=nul, where=f"{where}.{name}" if where else name)
        if found is not None:
            return found
    return None


def _label(name: str) -> str:
    """A key as a message may show it (a lone surrogate escaped)."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def check_text(value: Any, param: str, *, nul: bool, within: str = "") -> None:
    """A 400 naming ``param`` if any string of ``value`` holds what a tokenizer cannot read;
    the message says where: ``within`` (which part of the field ``value`` is), then the
    place inside ``value``."""
    found = find_unreadable(value, nul=nul)
    if found is not None:
        raise InvalidRequest(found.describe(param, within), param=param)
