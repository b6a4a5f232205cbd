"""Helpers for the parser tests: splitting a text into stream pieces, running a stream, and
checking that its events make sense."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from backends.chat.parsers import (
    ContentDelta,
    FailedCall,
    ParsedOutput,
    ParserEvent,
    ToolCallArgumentsDelta,
    ToolCallStart,
    ToolParser,
)

# Roughly how a BPE tokenizer cuts text: words, runs of spaces, single punctuation marks, so
# "<tool_call>" arrives as "<", "tool_call", ">" and markers are split across pieces.
_WORDISH = re.compile(r"\w+|\s+|[^\w\s]")


def sized(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def random_split(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    cuts = (
        sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, len(text) // 3)))
        if len(text) > 1
        else []
    )
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def splits(text: str) -> dict[str, list[str]]:
    """Ways to stream ``text``: whole, every character, fixed sizes, token-like, random."""
    ways = {
        "whole": [text],
        "chars": list(text),
        "pairs": sized(text, 2),
        "threes": sized(text, 3),
        "sevens": sized(text, 7),
        "words": _WORDISH.findall(text),
    }
    for seed in range(3):
        ways[f"random{seed}"] = random_split(text, seed)
    return ways


def run(
    parser: ToolParser,
    pieces: Sequence[str],
    *,
    stream_arguments: bool = False,
    calls_held: bool = False,
) -> list[ParserEvent]:
    stream = parser.stream(stream_arguments=stream_arguments, calls_held=calls_held)
    events: list[ParserEvent] = []
    for piece in pieces:
        events += stream.feed(piece)
    events += stream.finish()
    check_events(events)
    return events


def streamed(parser: ToolParser, pieces: Sequence[str], **kwargs: bool) -> ParsedOutput:
    return ParsedOutput.from_events(run(parser, pieces, **kwargs))


def check_events(events: Sequence[ParserEvent]) -> None:
    """Calls are numbered 0, 1, ... in order; arguments belong to the call being made; no event
    is empty; a failed call is the last event."""
    current = -1
    for k, event in enumerate(events):
        if isinstance(event, FailedCall):
            assert k == len(events) - 1, events
        elif isinstance(event, ToolCallStart):
            assert event.index == current + 1, events
            assert event.name
            current = event.index
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.index == current, events
            assert event.text
        else:
            assert isinstance(event, ContentDelta)
            assert event.text
