"""Texts and (query, document) pairs to token ids with the ``tokenizers`` library.

Nothing is cut unless the caller says how long an input may be: the service checks lengths and
refuses an over-long input, or asks for it cut. A ``tokenizers.Tokenizer`` holds its truncation
setting as state, so each length asked for gets its own instance (a handful at most).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from backends.errors import InvalidRequest


@dataclass(frozen=True)
class Encoded:
    """One input as the model takes it."""

    ids: list[int]
    type_ids: list[int] | None = None  # segment ids of a pair (BERT's token_type_ids)


class EncoderTokenizer:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._plain = Tokenizer.from_file(str(path))
        self._plain.no_truncation()
        self._plain.no_padding()
        self._cut: dict[int, Tokenizer] = {}
        self._lock = threading.Lock()

    def _tokenizer(self, limit: int | None) -> Tokenizer:
        if limit is None:
            return self._plain
        with self._lock:
            found = self._cut.get(limit)
            if found is None:
                found = Tokenizer.from_file(str(self._path))
                found.no_padding()
                found.enable_truncation(limit, strategy="longest_first")
                if len(self._cut) < 8:
                    self._cut[limit] = found
            return found

    def texts(self, texts: Sequence[str], limit: int | None, field: str) -> list[Encoded]:
        """Each text with the model's special tokens; cut to ``limit`` tokens if given.
        ``field``: the request's field the texts are, for an error (a
        :class:`~backends.errors.Field`)."""
        out = self._encode(list(texts), limit, field)
        return [Encoded(list(e.ids)) for e in out]

    def pairs(
        self, pairs: Sequence[tuple[str, str]], limit: int | None, field: str
    ) -> list[Encoded]:
        """Each (query, document) pair as one input ([CLS] q [SEP] d [SEP] for BERT)."""
        out = self._encode(list(pairs), limit, field)
        return [Encoded(list(e.ids), list(e.type_ids)) for e in out]

    def _encode(self, inputs: list[Any], limit: int | None, field: str) -> list[Any]:
        try:
            return list(self._tokenizer(limit).encode_batch(inputs))
        except (TypeError, ValueError):  # text the core's check (backends/text.py) let through
            raise InvalidRequest(
                ["The ", field, " cannot be tokenized: the model's tokenizer refuses its text."],
                param=field,
            ) from None

    def token_id(self, token: str) -> int | None:
        return self._plain.token_to_id(token)

    @property
    def vocab_size(self) -> int:
        return int(self._plain.get_vocab_size(with_added_tokens=True))
