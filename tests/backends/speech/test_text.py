"""Whisper's byte-level text: characters split across tokens, invalid bytes as U+FFFD (as
Hugging Face decodes them), and streamed pieces that always add up to the whole."""

from __future__ import annotations

import pytest

from backends.speech.text import ByteText, _byte_of_char

pytestmark = pytest.mark.unit

CHAR_OF = {b: c for c, b in _byte_of_char().items()}


def token(data: bytes) -> str:
    return "".join(CHAR_OF[b] for b in data)


# ids 0..4 are text; 5 is the first special token
VOCAB = {
    token(b" caf"): 0,
    token(b"\xc3"): 1,  # the first byte of "é"
    token(b"\xa9"): 2,  # its second
    token(b"\xff"): 3,  # never valid UTF-8
    token(b"!"): 4,
    "<|endoftext|>": 5,
}


def run(ids: list[int]) -> tuple[list[str], str]:
    stream = ByteText(VOCAB, first_special=5).stream()
    pieces = [stream.add(i) for i in ids]
    pieces.append(stream.flush())
    return [p for p in pieces if p], stream.text()


def test_a_character_split_over_two_tokens_waits_for_its_second_byte() -> None:
    pieces, text = run([0, 1, 2, 4])
    assert text == " café!"
    assert pieces == [" caf", "é", "!"]


def test_invalid_bytes_are_replacement_characters_like_hugging_face() -> None:
    pieces, text = run([0, 3, 4, 1])
    assert text == b" caf\xff!\xc3".decode("utf-8", errors="replace") == " caf\ufffd!\ufffd"
    assert "".join(pieces) == text


def test_special_tokens_have_no_bytes() -> None:
    pieces, text = run([0, 5, 4])
    assert text == " caf!"
