"""The output of one choice as a row of blocks: the model's thinking, its answer text, and each
tool call, one block each. Responses calls them output items, Anthropic content blocks.

A block opens when the kind of output changes (thinking, text, a new call) and closes when the
next one opens or the output ends, so every block is whole before the next starts; a call's
argument deltas go to that call's block. :class:`OutputBlocks` makes those block events; each
door renders them into its own stream events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from backends.core.handle import ChoiceDelta

BlockKind = Literal["thinking", "text", "call"]


@dataclass
class Block:
    kind: BlockKind
    index: int  # its place in the output
    text: str = ""  # so far: the thinking, the answer text, or the call's arguments
    call_id: str = ""  # a call's, as the core names it
    name: str = ""  # a call's function


# The events name the block and say what happened then; as the block goes on growing after
# (``text``), a renderer reads what it needs from the event.
@dataclass(frozen=True)
class Opened:
    block: Block  # empty when it opens


@dataclass(frozen=True)
class Added:
    """``text`` was added to ``block`` (which may not be the last one opened: a call's
    arguments can follow the start of the next call)."""

    block: Block
    text: str


@dataclass(frozen=True)
class Closed:
    block: Block
    text: str  # the block's whole text when it closed


BlockEvent = Opened | Added | Closed


class OutputBlocks:
    """Feed a choice's pieces in order, then :meth:`end` it; each call returns the block events
    it makes, in the order they happen."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._open: Block | None = None
        self._calls: dict[int, Block] = {}  # the core's call index → its block

    def feed(self, piece: ChoiceDelta) -> list[BlockEvent]:
        events: list[BlockEvent] = []
        if piece.reasoning:
            events += self._add("thinking", piece.reasoning)
        if piece.text:
            events += self._add("text", piece.text)
        for call in piece.calls:
            if call.id is not None:
                block = self._start("call", events, call_id=call.id, name=call.name or "")
                self._calls[call.index] = block
            if call.arguments:
                block = self._calls[call.index]
                block.text += call.arguments
                events.append(Added(block, call.arguments))
        return events

    def end(self, *, never_empty: bool = False) -> list[BlockEvent]:
        """Close the open block. ``never_empty``: an output without any block gets one empty
        text block (an empty answer is still an answer)."""
        events = self._close()
        if never_empty and not self.blocks:
            self._start("text", events)
            events += self._close()
        return events

    def _add(self, kind: BlockKind, text: str) -> list[BlockEvent]:
        events: list[BlockEvent] = []
        block = self._open
        if block is None or block.kind != kind:
            block = self._start(kind, events)
        block.text += text
        events.append(Added(block, text))
        return events

    def _start(
        self, kind: BlockKind, events: list[BlockEvent], call_id: str = "", name: str = ""
    ) -> Block:
        events += self._close()
        block = Block(kind, len(self.blocks), call_id=call_id, name=name)
        self.blocks.append(block)
        self._open = block
        events.append(Opened(block))
        return block

    def _close(self) -> list[BlockEvent]:
        block, self._open = self._open, None
        return [Closed(block, block.text)] if block is not None else []
