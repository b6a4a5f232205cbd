"""The stop-string matcher: nothing of a stop string is ever released, wherever pieces split."""

from __future__ import annotations

import pytest

from backends.engine.stops import StopMatcher, VisibleText
from backends.types import GeneratedToken

pytestmark = pytest.mark.unit


def run(stops: list[str], pieces: list[str]) -> tuple[list[str], str | None]:
    """Released text per piece (+ the flush when nothing matched) and the matched stop."""
    m = StopMatcher(stops)
    out = [m.feed(p) for p in pieces]
    out.append(m.flush())
    return out, m.matched


def test_no_stops_releases_everything_at_once() -> None:
    out, matched = run([], ["Hel", "lo", " world"])
    assert out == ["Hel", "lo", " world", ""]
    assert matched is None


def test_stop_inside_one_piece_cuts_the_text_before_it() -> None:
    out, matched = run(["END"], ["abc END def"])
    assert "".join(out) == "abc "
    assert matched == "END"


def test_stop_spanning_pieces_is_held_back_then_dropped() -> None:
    m = StopMatcher(["</s>"])
    assert m.feed("Hello <") == "Hello "  # "<" could start "</s>"
    assert m.holding == "<"
    assert m.feed("/") == ""
    assert m.feed("s>") == ""
    assert m.matched == "</s>"
    assert m.feed("more text") == ""  # after a match, nothing more
    assert m.flush() == ""


def test_a_false_start_is_released_when_it_stops_matching() -> None:
    m = StopMatcher(["</s>"])
    assert m.feed("a </") == "a "
    assert m.feed("b") == "</b"
    assert m.matched is None


def test_held_text_is_flushed_when_the_stream_ends() -> None:
    out, matched = run(["STOP"], ["go ST", "O"])
    assert out == ["go ", "", "STO"]
    assert matched is None


def test_earliest_of_several_stops_wins() -> None:
    out, matched = run(["world", "lo"], ["hello world"])
    assert "".join(out) == "hel"
    assert matched == "lo"


def test_overlapping_prefixes_keep_the_longest_candidate() -> None:
    # "aab" must be found even though "a" and "aa" both look like starts of it.
    out, matched = run(["aab"], ["xa", "a", "a", "b", "tail"])
    assert "".join(out) == "xa"
    assert matched == "aab"


def test_released_counts_characters_shown() -> None:
    m = StopMatcher(["\n\n"])
    m.feed("one\n")
    assert m.released == 3
    m.feed("\n two")
    assert m.released == 3 and m.matched == "\n\n"


def test_empty_stop_strings_are_ignored() -> None:
    out, matched = run([""], ["abc"])
    assert out == ["abc", ""] and matched is None


@pytest.mark.parametrize("stop", ["ab", "b\nc", "xyz", "c d", "é!"])
@pytest.mark.parametrize("text", ["aab\nc d é! xyz", "no stop here", "xyzxyz"])
def test_every_split_of_the_text_gives_the_same_result(stop: str, text: str) -> None:
    """Whatever the tokenization, the output equals the text cut before the first stop, and no
    intermediate release ever contains (a piece of) the stop beyond that cut."""
    cut = text.find(stop)
    expected = text if cut < 0 else text[:cut]
    for size in (1, 2, 3, 5):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        out, matched = run([stop], pieces)
        assert "".join(out) == expected, (size, out)
        assert matched == (stop if cut >= 0 else None)
        shown = ""
        for released in out:
            shown += released
            assert expected.startswith(shown)


def test_visible_text_says_which_stop_ended_it_and_places_its_tokens() -> None:
    text = VisibleText(["zz", "b c"])
    pieces = [text.feed(GeneratedToken(i, piece)) for i, piece in enumerate(["a ", "b", " c d"])]
    assert "".join(p.text for p in pieces) == "a "
    assert text.stopped and text.stop_sequence == "b c"
    shown = [t for p in pieces for t in p.ready]
    assert [(t.token_id, t.offset) for t in shown] == [(0, 0)]  # "b" and " c d" make the stop
    assert [p.token.offset for p in pieces if p.token] == [0, 2, 3]
    assert VisibleText(["never"]).stop_sequence is None
