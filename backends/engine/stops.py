"""Stop strings on a stream of decoded text, without ever leaking a stop into the output.

A stop string can span several tokens, so text that could be the start of a stop string is held
back until the next piece shows whether it really is one. When a stop string is found, the text
before it is released, the stop string and everything after it are dropped, and ``matched`` says
which stop string ended the text. The engine's own stop strings are not used: in 0.18 they need
a dynamic-batching engine and do not trim the text after the match. Matching runs on the owner
thread as each token is made, so a sequence ends at the token that completes its stop string.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from backends.types import GeneratedToken, SequenceDelta


class StopMatcher:
    """Feed decoded pieces in order; get back the text that is safe to show.

    >>> m = StopMatcher(["</s>"])
    >>> m.feed("Hello </"), m.feed("s> world"), m.matched
    ('Hello ', '', '</s>')
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.matched: str | None = None
        self.released = 0  # characters released so far
        self._held = ""

    def feed(self, piece: str) -> str:
        """The part of ``held + piece`` that can no longer belong to a stop string."""
        if self.matched is not None:
            return ""
        text = self._held + piece
        found = self._earliest_match(text)
        if found is not None:
            at, stop = found
            self.matched = stop
            self._held = ""
            return self._release(text[:at])
        keep = self._partial_suffix(text)
        self._held = text[len(text) - keep :] if keep else ""
        return self._release(text[: len(text) - keep])

    def flush(self) -> str:
        """The held-back text, once the stream ended without completing a stop string."""
        held, self._held = self._held, ""
        return self._release(held) if self.matched is None else ""

    @property
    def holding(self) -> str:
        return self._held

    def _release(self, text: str) -> str:
        self.released += len(text)
        return text

    def _earliest_match(self, text: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for stop in self.stops:
            at = text.find(stop)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, stop)
        return best

    def _partial_suffix(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of a stop string."""
        longest = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), longest, -1):
                if text.endswith(stop[:n]):
                    longest = n
                    break
        return longest


class VisibleText:
    """One sequence's output as a client may see it: tokens in, :class:`SequenceDelta` s out.

    Runs the stop matcher and keeps track of which tokens' text has been shown, so logprobs
    are reported with the text they belong to. A stop string ends the sequence (``stopped``);
    the tokens that show at least partly before it are reported, the rest are not.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self._matcher = StopMatcher(stops)
        self._waiting: list[GeneratedToken] = []  # tokens whose text is (partly) held back
        self._produced = 0  # characters of raw output so far

    @property
    def stopped(self) -> bool:
        return self._matcher.matched is not None

    @property
    def stop_sequence(self) -> str | None:
        """The stop string that ended the text, if one did."""
        return self._matcher.matched

    def feed(self, token: GeneratedToken) -> SequenceDelta:
        if self.stopped:
            return SequenceDelta("", token)
        token = dataclasses.replace(token, offset=self._produced)
        self._waiting.append(token)
        self._produced += len(token.text)
        text = self._matcher.feed(token.text)
        shown = self._matcher.released
        if self.stopped:
            ready = [t for t in self._waiting if t.offset < shown]
            self._waiting = []
        else:
            ready = [t for t in self._waiting if t.offset + len(t.text) <= shown]
            self._waiting = self._waiting[len(ready) :]
        return SequenceDelta(text, token, tuple(ready))

    def flush(self) -> SequenceDelta:
        """The held-back text and its tokens, once the sequence ended without a stop string."""
        ready, self._waiting = tuple(self._waiting), []
        return SequenceDelta(self._matcher.flush(), None, ready)
