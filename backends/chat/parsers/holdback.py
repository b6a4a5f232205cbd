"""How much of a text's end must wait, because it may be the start of a marker."""

from __future__ import annotations

from collections.abc import Iterable

WHITESPACE = " \t\r\n"


def partial_marker_suffix(text: str, markers: Iterable[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``markers``."""
    longest = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:n]):
                longest = n
                break
    return longest


def trailing_whitespace(text: str) -> int:
    """Length of the whitespace run that ends ``text``."""
    return len(text) - len(text.rstrip(WHITESPACE))
