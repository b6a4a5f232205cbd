"""The lazy tool-call grammar's guide (``tool_choice="auto"``): free until the model opens a
call, then held to the offered tools, on the demo tokenizer with its markers spelled as text and
on a copy where the marker is one special token."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backends.chat.parsers import get_tool_parser
from backends.engine.batch.guidance import Grammars, LazyGuide
from backends.types import CallGrammar
from config.settings import DEMO_MODEL_DIR
from tests.backends.chat.parsers.test_grammars import TOOLS, with_marker_tokens

pytestmark = pytest.mark.unit

EOS = 2


class Vocab:
    def __init__(self, path: Path, special: dict[str, int]) -> None:
        import llguidance

        self.special = special
        self.tokenizer = llguidance.LLTokenizer(str(path))
        self.grammars = Grammars(path, self.tokenizer.vocab_size, [EOS])

    def tokens(self, text: str) -> list[int]:
        return list(self.tokenizer.tokenize_str(text, parse_special=True))

    def guide(self, *, parallel: bool = True) -> LazyGuide:
        parser = get_tool_parser("hermes", self.special)
        call = parser.lazy_call_grammar(TOOLS, parallel=parallel)
        assert call is not None
        return self.grammars.lazy(call)

    def allowed(self, guide: LazyGuide) -> set[int]:
        logits = np.zeros(self.tokenizer.vocab_size, dtype=np.float32)
        guide.mask(logits)
        return {int(i) for i in np.flatnonzero(np.isfinite(logits))}


@pytest.fixture(scope="module", params=["text_marker", "token_marker"])
def vocab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Vocab:
    if request.param == "text_marker":
        return Vocab(DEMO_MODEL_DIR / "tokenizer.json", {})
    path = tmp_path_factory.mktemp("vocab") / "tokenizer.json"
    return Vocab(path, with_marker_tokens(path))


def feed(guide: LazyGuide, tokens: list[int]) -> None:
    for token in tokens:
        guide.consume(token)


def test_free_until_the_call_opens_then_only_offered_tools(vocab: Vocab) -> None:
    guide = vocab.guide()
    feed(guide, vocab.tokens("Let me look that up. "))
    assert not guide.constrains
    assert len(vocab.allowed(guide)) == vocab.tokenizer.vocab_size  # nothing masked
    feed(guide, vocab.tokens('<tool_call>\n{"name": "'))
    assert guide.constrains
    allowed = {vocab.tokenizer.decode_str([t]) for t in vocab.allowed(guide)}
    assert allowed and all(
        any(name.startswith(piece) for name in ("get_weather", "set_light", "ping"))
        for piece in allowed
    ), allowed
    feed(guide, vocab.tokens('set_light", "arguments": {"'))
    allowed = {vocab.tokenizer.decode_str([t]) for t in vocab.allowed(guide)}
    assert allowed and all("on".startswith(piece) for piece in allowed), allowed  # its one key


def test_the_token_that_opens_the_call_may_hold_text_before_it() -> None:
    vocab = Vocab(DEMO_MODEL_DIR / "tokenizer.json", {})
    tokens = vocab.tokens('ok <tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>')
    assert vocab.tokenizer.decode_str([tokens[1]]) == " <"  # the marker starts mid-token
    guide = vocab.guide(parallel=False)
    feed(guide, tokens)
    assert guide.constrains and guide.ended()  # one call written: the grammar is complete


def test_once_the_marker_is_written_only_the_call_may_follow() -> None:
    vocab = Vocab(DEMO_MODEL_DIR / "tokenizer.json", {})
    guide = vocab.guide()
    feed(guide, vocab.tokens("<tool_call>"))
    allowed = {vocab.tokenizer.decode_str([t]) for t in vocab.allowed(guide)}
    assert allowed and all("\n{".startswith(piece) for piece in allowed), allowed
    assert EOS not in vocab.allowed(guide)


def test_the_marker_token_starts_the_grammar(tmp_path: Path) -> None:
    special = with_marker_tokens(tmp_path / "tokenizer.json")
    vocab = Vocab(tmp_path / "tokenizer.json", special)
    call = get_tool_parser("hermes", special).lazy_call_grammar(TOOLS)
    assert call is not None and call.trigger_token == special["<tool_call>"]
    guide = vocab.grammars.lazy(call)
    feed(guide, vocab.tokens("ok"))
    guide.consume(special["<tool_call>"])
    assert guide.constrains
    allowed = {vocab.tokenizer.decode_str([t]) for t in vocab.allowed(guide)}
    assert allowed and all("\n{".startswith(piece) for piece in allowed), allowed


def test_a_grammar_that_cannot_start_leaves_the_output_free() -> None:
    vocab = Vocab(DEMO_MODEL_DIR / "tokenizer.json", {})
    # The call's start as the grammar spells it is not what the model wrote.
    guide = vocab.grammars.lazy(CallGrammar("<tool_call>", 'start: "<tool_calX>" /[a-z]+/\n'))
    feed(guide, vocab.tokens("<tool_call>\nabc"))
    assert not guide.constrains and not guide.ended()
    assert len(vocab.allowed(guide)) == vocab.tokenizer.vocab_size
