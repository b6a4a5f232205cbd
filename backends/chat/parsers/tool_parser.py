"""The contract of a tool-call format: find calls in a whole output or in a stream, and build
the grammar that forces a model to call.

A format is one small module (``hermes``, ``llama3_json``, ``mistral``, ``phi4_mini``) with a
:class:`ToolParser` subclass registered by name in :mod:`backends.chat.parsers.catalog`. A subclass
says only where calls begin (its markers) and what follows a marker (:meth:`open_block`); the
scanning, holding back, streaming and error recovery are shared (:mod:`.tool_stream`), which is
why ``extract`` and the stream agree by construction.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

from backends.chat.parsers.call_block import CallBlock
from backends.chat.parsers.tool_stream import ToolCallStream
from backends.chat.parsers.types import ParsedOutput, ToolSpec
from backends.types import CallGrammar


class ToolParser(ABC):
    """One tool-call format.

    ``special_tokens`` maps the special tokens of the model's vocabulary to their ids (for
    example ``{"<|python_tag|>": 128010}``). Parsing reads text and does not need them; the
    grammars do, because a special token can only be produced as that token, never spelled.
    """

    name: ClassVar[str]
    # Strings that open a call block wherever they appear.
    markers: ClassVar[tuple[str, ...]] = ()
    # Strings that open a call block only at the start of the output or right after a call
    # (whitespace aside): Llama 3 writes its calls as bare JSON, and a "{" in prose is no call.
    boundary_markers: ClassVar[tuple[str, ...]] = ()
    # Every token the parser must find in the text: the markers above, closing ones included.
    marker_tokens: ClassVar[tuple[str, ...]] = ()

    def __init__(self, special_tokens: Mapping[str, int] | None = None) -> None:
        self.special_tokens: Mapping[str, int] = dict(special_tokens or {})

    def kept_tokens(self) -> dict[int, str]:
        """Id → text of the format's markers that are special tokens in this vocabulary.

        onnxruntime-genai's decoder drops special tokens, so a door must write these back into
        the text it feeds (Llama's ``<|python_tag|>``, Mistral's ``[TOOL_CALLS]``, Phi-4-mini's
        ``<|tool_call|>``); without them the calls read as plain text."""
        return {self.special_tokens[t]: t for t in self.marker_tokens if t in self.special_tokens}

    def new_call_id(self) -> str:
        """An id for a call the model wrote without one, in the form the format's chat
        templates accept when a client sends it back (OpenAI's ``call_`` and 24 hex digits
        unless the format says otherwise)."""
        return f"call_{uuid.uuid4().hex[:24]}"

    @abstractmethod
    def open_block(self, marker: str) -> CallBlock:
        """A parser for what follows ``marker`` (one of :attr:`markers` or
        :attr:`boundary_markers`)."""

    @abstractmethod
    def forced_call_grammar(
        self, tools: Sequence[ToolSpec], *, tool_name: str | None = None, parallel: bool = True
    ) -> str:
        """An llguidance Lark grammar under which the model can only call: one or more calls
        (exactly one unless ``parallel``) to any of ``tools`` (``tool_choice="required"``), or
        exactly one call to ``tool_name`` (a named ``tool_choice``). Each call's arguments
        match that tool's schema, and the output parses back with :meth:`extract`."""

    # The marker that opens a call in this format, where its forced-call grammar starts with it:
    # the trigger of the lazy grammar that holds calls the model opens to the offered tools.
    lazy_trigger: ClassVar[str | None] = None

    def lazy_call_grammar(
        self, tools: Sequence[ToolSpec], *, parallel: bool = True
    ) -> CallGrammar | None:
        """For ``tool_choice="auto"``: the forced-call grammar, applied from the point where
        the model opens a call (:class:`backends.types.CallGrammar`); None where the format
        has no such marker."""
        trigger = self.lazy_trigger
        if trigger is None:
            return None
        head, rest = self.forced_call_grammar(tools, parallel=parallel).split("\n", 1)
        # The token where the marker begins may hold text before it.
        first = "\\" + trigger[0] if trigger[0] in "\\]^-[/" else trigger[0]
        grammar = (
            f"start: lazy_prefix? {head.removeprefix('start: ')}\n{rest}"
            f"lazy_prefix: /[^{first}]+/\n"
        )
        return CallGrammar(trigger, grammar, self.special_tokens.get(trigger))

    def extract(self, text: str, *, calls_held: bool = False) -> ParsedOutput:
        """A whole output's content and calls (and, ``calls_held``, its failed calls)."""
        stream = self.stream(calls_held=calls_held)
        events = stream.feed(text)
        events += stream.finish()
        return ParsedOutput.from_events(events)

    def stream(self, *, stream_arguments: bool = False, calls_held: bool = False) -> ToolCallStream:
        """A parser for one streamed output (see :mod:`.tool_stream` for ``stream_arguments``
        and ``calls_held``: a grammar holds the calls, so one the output ends inside failed)."""
        return ToolCallStream(self, stream_arguments=stream_arguments, calls_held=calls_held)
