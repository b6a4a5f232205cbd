"""The output-blocks state machine (routes/door/blocks.py) that Responses and Messages render."""

from __future__ import annotations

import pytest

from backends.chat.output import CallDelta
from backends.core.handle import ChoiceDelta
from routes.door.blocks import Added, BlockEvent, Closed, Opened, OutputBlocks

pytestmark = pytest.mark.unit


def plain(events: list[BlockEvent]) -> list[tuple[str, int, str]]:
    """(what happened, to which block, with what text) of each event."""
    out = []
    for e in events:
        if isinstance(e, Opened):
            out.append(("open " + e.block.kind, e.block.index, ""))
        elif isinstance(e, Added):
            out.append(("add", e.block.index, e.text))
        else:
            out.append(("close", e.block.index, e.text))
    return out


def piece(text: str = "", reasoning: str = "", *calls: CallDelta) -> ChoiceDelta:
    return ChoiceDelta(0, text, reasoning=reasoning, calls=calls)


def test_a_block_opens_when_the_output_kind_changes_and_closes_when_the_next_opens() -> None:
    blocks = OutputBlocks()
    events = blocks.feed(piece(reasoning="Hm"))
    events += blocks.feed(piece(reasoning=" ok"))
    events += blocks.feed(piece("Sure", " done"))  # thinking first, then the text, in a piece
    events += blocks.feed(piece("."))
    events += blocks.end()
    assert plain(events) == [
        ("open thinking", 0, ""),
        ("add", 0, "Hm"),
        ("add", 0, " ok"),
        ("add", 0, " done"),
        ("close", 0, "Hm ok done"),
        ("open text", 1, ""),
        ("add", 1, "Sure"),
        ("add", 1, "."),
        ("close", 1, "Sure."),
    ]
    assert [(b.kind, b.text) for b in blocks.blocks] == [
        ("thinking", "Hm ok done"),
        ("text", "Sure."),
    ]


def test_every_call_is_a_block_and_its_arguments_go_to_it() -> None:
    blocks = OutputBlocks()
    events = blocks.feed(piece("", "", CallDelta(0, "call_a", "f", '{"x"')))
    events += blocks.feed(
        piece("", "", CallDelta(1, "call_b", "g"), CallDelta(0, arguments=": 1}"))
    )
    events += blocks.end()
    assert plain(events) == [
        ("open call", 0, ""),
        ("add", 0, '{"x"'),
        ("close", 0, '{"x"'),
        ("open call", 1, ""),
        ("add", 0, ": 1}"),  # a late argument still goes to its own call
        ("close", 1, ""),
    ]
    first, second = blocks.blocks
    assert (first.call_id, first.name, first.text) == ("call_a", "f", '{"x": 1}')
    assert (second.call_id, second.name, second.text) == ("call_b", "g", "")


def test_two_calls_in_a_row_are_two_blocks_and_text_after_a_call_is_a_new_block() -> None:
    blocks = OutputBlocks()
    events = blocks.feed(piece("", "", CallDelta(0, "c0", "f"), CallDelta(1, "c1", "f")))
    events += blocks.feed(piece("after"))
    assert [e for e, _, _ in plain(events)] == [
        "open call",
        "close",
        "open call",
        "close",
        "open text",
        "add",
    ]


def test_the_end_of_an_empty_output() -> None:
    assert OutputBlocks().end() == []
    blocks = OutputBlocks()
    assert plain(blocks.end(never_empty=True)) == [("open text", 0, ""), ("close", 0, "")]
    blocks = OutputBlocks()
    blocks.feed(piece("x"))
    assert plain(blocks.end(never_empty=True)) == [("close", 0, "x")]
    assert blocks.end() == [], "closing twice closes nothing"
    assert isinstance(OutputBlocks().end(never_empty=True)[-1], Closed)
