"""The resumable JSON scanner agrees with ``json.loads`` on where a value ends and whether it
is valid, however its text is split."""

from __future__ import annotations

import json
import random

import pytest

from backends.chat.parsers.json_scan import JsonScanner
from tests.backends.chat.parsers.streaming import splits

pytestmark = pytest.mark.unit

VALID = [
    "{}",
    "[]",
    '""',
    "0",
    "-0.5",
    "1.5e10",
    "2E-3",
    "true",
    "null",
    '{"a": [1, -2.5e+3, true, false, null, "x\\u00e9\\n\\"\\\\\\/"]}',
    '{"k": {"n": {}}, "l": [[[]], {}]}',
    '"café 東京 🎉"',
    ' \n\t{"spaced" :  1 , "out" : [ 1 , 2 ] }',
]
INVALID = [
    '{"a":01}',
    '{"a":1,}',
    "[1,]",
    "[1 2]",
    '{"a" 1}',
    "{'a': 1}",
    "-",
    "1.",
    "1e",
    ".5",
    '"\\x"',
    '"\\u12g4"',
    '"a\nb"',
    "nul",
    "NaN",
    "[1}",
    '{"a": 1]',
    "}",
]


def scan(pieces: list[str]) -> tuple[str, int]:
    """(status after the end of input, characters read)."""
    scanner = JsonScanner()
    read = 0
    for piece in pieces:
        if scanner.status != "open":
            break
        read += scanner.feed(piece)
    if scanner.status == "open":
        scanner.finish()
    return scanner.status, read


@pytest.mark.parametrize("text", VALID)
def test_valid_json_is_done_at_its_last_character(text: str) -> None:
    for way, pieces in splits(text).items():
        assert scan(pieces) == ("done", len(text)), way


@pytest.mark.parametrize("text", INVALID)
def test_invalid_json_is_an_error(text: str) -> None:
    for way, pieces in splits(text).items():
        assert scan(pieces)[0] == "error", way


def test_the_end_is_found_before_what_follows() -> None:
    scanner = JsonScanner()
    text = '{"a": "}", "b": [1]}</tool_call> and more'
    assert scanner.feed(text) == text.index("<")
    assert scanner.status == "done"
    assert scanner.first == "{"


def test_a_number_ends_at_the_first_character_after_it() -> None:
    scanner = JsonScanner()
    assert scanner.feed("12.5,") == 4
    assert scanner.status == "done"


def test_an_open_value_waits_for_more() -> None:
    scanner = JsonScanner()
    assert scanner.feed('{"a": [1, "x') == 12
    assert scanner.status == "open"


def mutate(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(chars) + 1)
        op = rng.random()
        if op < 0.4 and chars:
            del chars[min(at, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(at, rng.choice('{}[]",:0-.e \\ntrua'))
        elif chars:
            chars[min(at, len(chars) - 1)] = rng.choice('{}[]",:1')
    return "".join(chars)


def test_agrees_with_json_loads_on_random_near_json() -> None:
    rng = random.Random(1234)
    seeds = [t for t in VALID if t.strip()[0] in '{["']
    for _ in range(3000):
        text = mutate(rng.choice(seeds), rng).strip()
        if not text:
            continue
        try:
            value_end = json.JSONDecoder().raw_decode(text)[1]
            valid = value_end == len(text)
        except ValueError:
            valid = False
        status, read = scan([text])
        if valid:
            assert (status, read) == ("done", len(text)), text
        elif status == "done":
            # Done before the end: the value itself was valid and something followed it.
            json.loads(text[:read])
            assert read < len(text), text
