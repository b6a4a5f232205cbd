"""Constrained decoding for the batch engine with llguidance's own Python API.

onnxruntime-genai uses the same library inside its Generator, so a JSON schema, a regex or a
Lark grammar constrains both engines alike: before each token the matcher computes the set of
tokens the grammar allows, the others' logits are masked out, and the chosen token is fed back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from backends.errors import GuidanceError
from backends.types import CallGrammar, GuidanceKind

__all__ = ["Constraint", "Grammars", "Guide", "GuidanceError", "LazyGuide"]

log = logging.getLogger(__name__)

_FORMATS = {"json_schema": "json_schema", "regex": "regex", "lark_grammar": "lark"}


class Grammars:
    """One model's llguidance tokenizer, and matchers made from it."""

    def __init__(self, tokenizer_json: Path, vocab_size: int, eos_ids: Iterable[int]) -> None:
        import llguidance

        self._ll = llguidance
        self.vocab_size = vocab_size
        self._tokenizer: Any = None
        self._args = (str(tokenizer_json), vocab_size, sorted(eos_ids))

    def _ll_tokenizer(self) -> Any:
        if self._tokenizer is None:  # built on first use: most requests have no grammar
            path, vocab, eos = self._args
            self._tokenizer = self._ll.LLTokenizer(path, n_vocab=vocab, eos_token=eos)
        return self._tokenizer

    def decode(self, tokens: list[int]) -> bytes:
        return bytes(self._ll_tokenizer().decode_bytes(tokens))

    def lazy(self, call: CallGrammar) -> LazyGuide:
        return LazyGuide(self, call)

    def matcher(self, kind: GuidanceKind, text: str) -> Guide:
        grammar = self._ll.grammar_from(_FORMATS[kind], text)  # type: ignore[arg-type]
        matcher = self._ll.LLMatcher(self._ll_tokenizer(), grammar, log_level=0)
        if matcher.is_error():
            raise GuidanceError(f"invalid {kind}: {matcher.get_error()}")
        return Guide(matcher, self.vocab_size, self._ll)


class Constraint(Protocol):
    """What the sampler asks of a sequence's grammar."""

    @property
    def constrains(self) -> bool: ...  # whether :meth:`mask` may change the logits now

    def mask(self, logits: npt.NDArray[np.float32]) -> None: ...
    def ended(self) -> bool: ...
    def consume(self, token: int) -> None: ...
    def validate(self, tokens: list[int]) -> int: ...  # how many first ones it would take


class Guide:
    """One sequence's matcher."""

    constrains = True

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

    def validate(self, tokens: list[int]) -> int:
        """How many first tokens of ``tokens`` (a draft) the grammar would take now, without
        taking any."""
        return int(self._matcher.validate_tokens(tokens))


class LazyGuide:
    """A tool-call grammar that waits for its trigger (llama-server's lazy grammars).

    Until the generated text holds the trigger (``<tool_call>``) nothing is masked, so the
    model writes what it would anyway. The grammar then starts at the token where the trigger
    begins (the grammar admits text before the marker within that token), is fed the tokens
    since, and holds the rest of the output to calls naming an offered tool with arguments its
    schema admits; when the calls are complete the sequence ends. If the model spelled the
    call's start in a way the grammar does not admit, the output stays free (the parser then
    reads what it can, as without a grammar)."""

    def __init__(self, grammars: Grammars, call: CallGrammar) -> None:
        self._grammars = grammars
        self._call = call
        self._trigger = call.trigger.encode()
        self._tail: list[int] = []  # the last tokens, enough to hold the trigger
        self._guide: Guide | None = None
        self._free = False  # given up: the call did not start as the grammar spells it

    @property
    def constrains(self) -> bool:
        return self._guide is not None

    def mask(self, logits: npt.NDArray[np.float32]) -> None:
        if self._guide is not None:
            self._guide.mask(logits)

    def ended(self) -> bool:
        return self._guide is not None and self._guide.ended()

    def validate(self, tokens: list[int]) -> int:
        return len(tokens) if self._guide is None else self._guide.validate(tokens)

    def consume(self, token: int) -> None:
        if self._guide is not None:
            self._guide.consume(token)
            return
        if self._free:
            return
        self._tail = [*self._tail, token][-(len(self._trigger) + 1) :]
        if token == self._call.trigger_token:
            start = len(self._tail) - 1
        elif self._trigger in self._grammars.decode(self._tail):
            decode, tail = self._grammars.decode, self._tail
            start = max(i for i in range(len(tail)) if self._trigger in decode(tail[i:]))
        else:
            return
        try:
            guide = self._grammars.matcher("lark_grammar", self._call.grammar)
            for t in self._tail[start:]:
                guide.consume(t)
        except GuidanceError as exc:
            log.info("tool-call grammar not applied: %s", first_line(str(exc)))
            self._free = True
            return
        self._guide = guide


def first_line(error: str, limit: int = 300) -> str:
    """llguidance's message without the parser state and grammar it appends."""
    return " ".join(error.split("<state>")[0].split())[:limit]
