"""Mistral calls, in the two forms its tokenizers have used.

Before tokenizer v11 (Mistral 7B v0.3, Mixtral 8x22B, Mistral Nemo): one JSON list after the
``[TOOL_CALLS]`` token::

    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]

From v11 (Mistral Small 3.1+, Devstral, Magistral): each call is the ``[TOOL_CALLS]`` token, the
bare name, ``[ARGS]``, then the arguments object; v11 itself may put ``[CALL_ID]`` and an id
before ``[ARGS]``::

    [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "CET"}

When ``[ARGS]`` was a skipped special token the name runs straight into the ``{``; that is
accepted too. The grammar uses the v11 form when the vocabulary has ``[ARGS]``.
"""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Sequence

from backends.chat.parsers.call_block import CallBlock
from backends.chat.parsers.call_bodies import WS, Body, ListOrObject, PendingCall, arguments_text
from backends.chat.parsers.catalog import register_tool_parser
from backends.chat.parsers.grammar import forced_call_grammar as build_grammar
from backends.chat.parsers.grammar import json_call_header, lark_string, token_or_text
from backends.chat.parsers.json_scan import JsonScanner, ScanStatus
from backends.chat.parsers.tool_parser import ToolParser
from backends.chat.parsers.types import ToolSpec

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"
NAME = re.compile(r"[A-Za-z0-9_.\-]+")
ID_CHARS = string.ascii_letters + string.digits
ID_LENGTH = 9  # Mistral's templates refuse any other call id


@register_tool_parser("mistral")
class MistralToolParser(ToolParser):
    markers = (TOOL_CALLS,)
    lazy_trigger = TOOL_CALLS
    marker_tokens = (TOOL_CALLS, ARGS, CALL_ID)

    def new_call_id(self) -> str:
        """Nine letters and digits: Mistral's chat templates refuse any other id ("Tool call
        IDs should be alphanumeric strings with length 9!"), as mistral-common makes them."""
        return "".join(secrets.choice(ID_CHARS) for _ in range(ID_LENGTH))

    def open_block(self, marker: str) -> CallBlock:
        return CallBlock(MistralBody())

    def forced_call_grammar(
        self, tools: Sequence[ToolSpec], *, tool_name: str | None = None, parallel: bool = True
    ) -> str:
        """``[TOOL_CALLS]name[ARGS]{...}`` per call when the vocabulary has ``[ARGS]`` (v11+),
        else ``[TOOL_CALLS][call, call, ...]``."""
        tokens = self.special_tokens
        tool_calls = token_or_text(TOOL_CALLS, tokens)
        if ARGS in tokens:
            for tool in tools:
                if not NAME.fullmatch(tool.name):
                    raise ValueError(
                        f"Tool name {tool.name!r} cannot be written in Mistral's v11 form."
                    )
            args_token = token_or_text(ARGS, tokens)

            def named(tool: ToolSpec, args: str) -> str:
                return f"{tool_calls} {lark_string(tool.name)} {args_token} {args}"

            return build_grammar(tools, tool_name=tool_name, parallel=parallel, call=named)

        def listed(tool: ToolSpec, args: str) -> str:
            return f'{lark_string(json_call_header(tool.name))} {args} "}}"'

        return build_grammar(
            tools,
            tool_name=tool_name,
            parallel=parallel,
            call=listed,
            separator='", "',
            before=f'{tool_calls} "["',
            after='"]"',
        )


class MistralBody(Body):
    """A list of calls or one call object (before v11), or ``name[ARGS]{...}`` (v11+):
    whichever the first character says."""

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.calls = []
        self._inner: Body | None = None

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        if self._inner is None:
            while i < n and text[i] in WS:
                i += 1
            if i == n:
                return i
            if NAME.match(text[i]):
                self._inner = NamedCall()
            elif text[i] in "[{":
                self._inner = ListOrObject()
            else:
                self.status = "error"
                return i
        i = self._inner.feed(text, i)
        self.calls = self._inner.calls  # a list-or-object body makes its list when it starts
        self.status = self._inner.status
        return i


class NamedCall(Body):
    """``name[ARGS]{...}``, ``name[CALL_ID]id[ARGS]{...}`` or ``name{...}``."""

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.call = PendingCall()
        self.calls = [self.call]
        self._state = "name"  # name, tag, call_id, before_args, args
        self._name = ""
        self._tag = ""
        self._had_call_id = False
        self._scanner: JsonScanner | None = None
        self._raw = ""

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while i < n and self.status == "open":
            if self._scanner is not None:
                return self._feed_arguments(text, i)
            c = text[i]
            state = self._state
            if state == "name" and NAME.match(c):
                self._name += c
            elif state in ("name", "call_id") and c == "[":
                self.call.name = self._name
                self._state, self._tag = "tag", c
            elif state in ("name", "before_args") and c == "{":
                self.call.name = self._name
                self.call.streamable = True
                self._scanner = JsonScanner()
                continue  # the scanner reads the "{"
            elif state == "tag":
                self._tag += c
                self._read_tag()
            elif state == "call_id" and c.isalnum():
                self.call.id = (self.call.id or "") + c
            elif state == "before_args" and c in WS:
                pass
            else:
                self.status = "error"
                break
            i += 1
        return i

    def _read_tag(self) -> None:
        if self._tag == ARGS:
            self._state = "before_args"
        elif self._tag == CALL_ID and not self._had_call_id:
            self._had_call_id = True
            self._state = "call_id"
        elif not (ARGS.startswith(self._tag) or CALL_ID.startswith(self._tag)):
            self.status = "error"

    def _feed_arguments(self, text: str, i: int) -> int:
        assert self._scanner is not None
        j = self._scanner.feed(text, i)
        self._raw += text[i:j]
        self.call.streamed += text[i:j]
        if self._scanner.status == "error":
            self.status = "error"
        elif self._scanner.status == "done":
            arguments = arguments_text(self._raw)
            self.call.arguments = arguments
            self.status = "done" if arguments is not None else "error"
        return j
