"""Prompt-lookup drafting: the tokens that followed the sequence's last n-gram where it last
stood in its prompt or its output, proposed for the model to verify in one run.

Each sequence keeps a lookup of its n-grams (``lo`` to ``hi`` tokens: by default
``PROMPT_LOOKUP_MIN`` to ``PROMPT_LOOKUP_MAX``) to the position after their latest
occurrence, filled as tokens are fed; the longest n-gram that ends the sequence and
occurred before proposes what followed it (vLLM's ``prompt_lookup_min/max``, llama.cpp's
``ngram-simple``).

How many tokens a row drafts, and whether it drafts at all, is
:mod:`backends.engine.batch.speculation`'s decision.
"""

from __future__ import annotations

from collections.abc import Sequence

from backends.types import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN


class NgramIndex:
    """One sequence's tokens and, for each n-gram in them, the position after its latest
    occurrence."""

    def __init__(self, lo: int = PROMPT_LOOKUP_MIN, hi: int = PROMPT_LOOKUP_MAX) -> None:
        self.lo, self.hi = lo, hi
        self.tokens: list[int] = []
        self._after: dict[tuple[int, ...], int] = {}

    def sync(self, tokens: Sequence[int], last: int | None = None) -> None:
        """Take the tokens of ``tokens`` past those already seen (the sequence only grows),
        then ``last`` if given: the token chosen to follow them, not yet fed."""
        for token in tokens[len(self.tokens) :]:
            self._add(token)
        if last is not None and len(self.tokens) == len(tokens):
            self._add(last)

    def _add(self, token: int) -> None:
        own, end = self.tokens, len(self.tokens)
        for n in range(self.lo, min(self.hi, end) + 1):  # the n-grams this token follows
            self._after[tuple(own[end - n : end])] = end
        own.append(token)

    def propose(self, k: int) -> list[int]:
        """Up to ``k`` tokens that followed the longest n-gram ending the sequence, where it
        last stood before; none if no such n-gram stood before."""
        own = self.tokens
        for n in range(min(self.hi, len(own)), self.lo - 1, -1):
            at = self._after.get(tuple(own[-n:]))
            if at is not None:
                return own[at : at + k]
        return []
