"""Constrained decoding for the batch engine with llguidance's own Python API.

onnxruntime-genai uses the same library inside its Generator, so a JSON schema, a regex or a
Lark grammar constrains both engines alike: before each token the matcher computes the set of
tokens the grammar allows, the others' logits are masked out, and the chosen token is fed back.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from backends.errors import GuidanceError
from backends.types import GuidanceKind

__all__ = ["Grammars", "Guide", "GuidanceError"]

_FORMATS = {"json_schema": "json_schema", "regex": "regex", "lark_grammar": "lark"}


class Grammars:
    """One model's llguidance tokenizer, and matchers made from it."""

    def __init__(self, tokenizer_json: Path, vocab_size: int, eos_ids: Iterable[int]) -> None:
        import llguidance

        self._ll = llguidance
        self.vocab_size = vocab_size
        self._tokenizer: Any = None
        self._args = (str(tokenizer_json), vocab_size, sorted(eos_ids))

    def matcher(self, kind: GuidanceKind, text: str) -> Guide:
        if self._tokenizer is None:  # built on first use: most requests have no grammar
            path, vocab, eos = self._args
            self._tokenizer = self._ll.LLTokenizer(path, n_vocab=vocab, eos_token=eos)
        grammar = self._ll.grammar_from(_FORMATS[kind], text)  # type: ignore[arg-type]
        matcher = self._ll.LLMatcher(self._tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise GuidanceError(f"invalid {kind}: {matcher.get_error()}")
        return Guide(matcher, self.vocab_size, self._ll)


class Guide:
    """One sequence's matcher."""

    def __init__(self, matcher: Any, vocab_size: int, ll: Any) -> None:
        from llguidance.numpy import allocate_token_bitmask

        self._matcher = matcher
        self._bitmask = allocate_token_bitmask(1, vocab_size)
        self._ll = ll

    def mask(self, logits: npt.NDArray[np.float32]) -> None:
        """Set the logits of the tokens the grammar forbids now to -inf (in place, 1-D)."""
        from llguidance.numpy import apply_token_bitmask_inplace, fill_next_token_bitmask

        fill_next_token_bitmask(self._matcher, self._bitmask, 0)
        apply_token_bitmask_inplace(logits.reshape(1, -1), self._bitmask)

    def ended(self) -> bool:
        """The grammar is complete and admits nothing more (a forced call written): the
        sequence ends here, without waiting for an EOS that ``min_tokens`` may hold back."""
        return bool(self._matcher.is_stopped())

    def consume(self, token: int) -> None:
        if not self._matcher.consume_token(token):
            raise GuidanceError(f"the grammar refused token {token}: {self._matcher.get_error()}")


def first_line(error: str, limit: int = 300) -> str:
    """llguidance's message without the parser state and grammar it appends."""
    return " ".join(error.split("<state>")[0].split())[:limit]
