"""Whisper's text from its tokens, byte for byte as Hugging Face decodes it.

Whisper's tokenizer is a byte-level BPE (GPT-2's): each text token stands for a few bytes, and
a character may span tokens. onnxruntime-genai's decoders drop bytes that are not valid UTF-8
(a random or confused model writes them), so the text is rebuilt here from tokenizer.json:
the tokens' bytes, joined, decoded as UTF-8 with U+FFFD for invalid bytes, as Hugging Face's
``decode`` does. Special tokens and timestamps are left out.
"""

from __future__ import annotations

import json
from pathlib import Path

REPLACEMENT = "\ufffd"


def _byte_of_char() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, inverted: the printable stand-in of each byte."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    chars, extra = {}, 0
    for b in range(256):
        if b in kept:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


class ByteText:
    """Token ids (below ``first_special``) to the bytes they stand for."""

    def __init__(self, vocab: dict[str, int], first_special: int) -> None:
        table = _byte_of_char()
        self._bytes: dict[int, bytes] = {}
        for token, token_id in vocab.items():
            if token_id < first_special and all(c in table for c in token):
                self._bytes[token_id] = bytes(table[c] for c in token)

    @classmethod
    def from_folder(cls, folder: Path, first_special: int) -> ByteText | None:
        """None when the folder's tokenizer is not a byte-level BPE."""
        try:
            spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        model = spec.get("model") or {}
        if model.get("type") != "BPE" or "ByteLevel" not in json.dumps(spec.get("decoder")):
            return None
        return cls(dict(model.get("vocab") or {}), first_special)

    def stream(self) -> TextStream:
        return TextStream(self._bytes)


class TextStream:
    """Feed tokens one at a time; get the newly settled text. Characters still incomplete
    (trailing U+FFFD) are held back until a later token settles them, so the pieces always
    add up to :meth:`text`."""

    def __init__(self, table: dict[int, bytes]) -> None:
        self._table = table
        self._data = bytearray()
        self._sent = 0

    def add(self, token: int) -> str:
        self._data += self._table.get(token, b"")
        text = self.text()
        settled = len(text.rstrip(REPLACEMENT))
        if settled <= self._sent:
            return ""
        piece, self._sent = text[self._sent : settled], settled
        return piece

    def flush(self) -> str:
        text = self.text()
        piece, self._sent = text[self._sent :], len(text)
        return piece

    def text(self) -> str:
        return self._data.decode("utf-8", errors="replace")
