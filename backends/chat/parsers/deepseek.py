"""DeepSeek-V3 and R1 calls (the R1 distills too), between special tokens.

V3, R1 and the distills write each call's type, name and a fenced JSON block::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1 and later drop the type and the fence: ``<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>
{"city": "Paris"}<｜tool▁call▁end｜>``. Both are read; parallel calls follow each other
(whitespace between) before ``<｜tool▁calls▁end｜>``. An output that ends after a whole call
without the closing token (a stop string, a length limit) still has its calls. The grammar
uses the first form, the one the R1 distills' template writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from backends.chat.parsers.call_block import CallBlock
from backends.chat.parsers.call_bodies import WS, Body, PendingCall, arguments_text
from backends.chat.parsers.catalog import register_tool_parser
from backends.chat.parsers.grammar import forced_call_grammar as build_grammar
from backends.chat.parsers.grammar import lark_string, token_or_text
from backends.chat.parsers.json_scan import JsonScanner, ScanStatus
from backends.chat.parsers.tool_parser import ToolParser
from backends.chat.parsers.types import ToolSpec

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
FENCE_OPEN = "```json"
FENCE_CLOSE = "```"
MAX_HEAD = 256  # characters of type or name before the separator: longer is not a call


@register_tool_parser("deepseek_v3")
class DeepSeekToolParser(ToolParser):
    markers = (CALLS_BEGIN,)
    lazy_trigger = CALLS_BEGIN
    marker_tokens = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP)

    def open_block(self, marker: str) -> CallBlock:
        return CallBlock(DeepSeekCalls())

    def forced_call_grammar(
        self, tools: Sequence[ToolSpec], *, tool_name: str | None = None, parallel: bool = True
    ) -> str:
        """The V3/R1 form, one call after another (a newline between)."""
        tokens = self.special_tokens
        begin, end, sep = (token_or_text(t, tokens) for t in (CALL_BEGIN, CALL_END, SEP))

        def call(tool: ToolSpec, args: str) -> str:
            name = lark_string(f"{tool.name}\n{FENCE_OPEN}\n")
            return f'{begin} "function" {sep} {name} {args} "\\n{FENCE_CLOSE}" {end}'

        return build_grammar(
            tools,
            tool_name=tool_name,
            parallel=parallel,
            call=call,
            separator=r'"\n"',
            before=token_or_text(CALLS_BEGIN, tokens),
            after=token_or_text(CALLS_END, tokens),
        )


class DeepSeekCalls(Body):
    """Calls until ``<｜tool▁calls▁end｜>``, which this body reads itself (it shares its start
    with the next call's opening token)."""

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.calls: list[PendingCall] = []
        self._call: DeepSeekCall | None = None
        self._marker = ""  # the opening or closing token read so far

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while i < n and self.status == "open":
            if self._call is not None:
                i = self._call.feed(text, i)
                if self._call.status == "error":
                    self.status = "error"
                elif self._call.status == "done":
                    self._call = None
                continue
            c = text[i]
            if not self._marker and c in WS:
                i += 1
                continue
            self._marker += c
            if self._marker == CALL_BEGIN:
                self._marker = ""
                self._call = DeepSeekCall()
                self.calls.append(self._call.call)
            elif self._marker == CALLS_END and self.calls:
                self.status = "done"
            elif not (CALL_BEGIN.startswith(self._marker) or CALLS_END.startswith(self._marker)):
                self.status = "error"
                break
            i += 1
        return i

    def finish(self) -> None:
        # Cut after a whole call (no closing token): the calls stand.
        whole = self._call is None and not self._marker and self.calls
        self.status = "done" if self.status == "done" or whole else "error"


class DeepSeekCall(Body):
    """One call after its opening token, up to and with ``<｜tool▁call▁end｜>``: a head up to
    the separator (V3: the type; V3.1: the name), then what the head says follows."""

    def __init__(self) -> None:
        self.status: ScanStatus = "open"
        self.call = PendingCall()
        self.calls = [self.call]
        self._head = ""
        self._name: str | None = None  # V3: the name after the separator, read to its newline
        self._steps: list[str] = []  # what is left to read: literals, or ARGS
        self._matched = ""  # the part of the current literal read so far
        self._scanner: JsonScanner | None = None
        self._raw = ""

    def feed(self, text: str, i: int) -> int:
        n = len(text)
        while i < n and self.status == "open":
            if self._scanner is not None:
                i = self._feed_arguments(text, i)
            elif not self._steps and self._name is None:
                i = self._feed_head(text, i)
            elif self._name is not None and not self._steps:
                i = self._feed_name(text, i)
            else:
                i = self._feed_step(text, i)
        return i

    def _feed_head(self, text: str, i: int) -> int:
        self._head += text[i]
        if self._head.endswith(SEP):
            head = self._head[: -len(SEP)].strip()
            self._head = head
            if not _plain(head):
                self.status = "error"
            elif i + 1 < len(text):
                return self._after_separator(text, i + 1)
            else:
                self._steps = [AFTER_SEP]
        elif len(self._head) > MAX_HEAD + len(SEP):
            self.status = "error"
        return i + 1

    def _after_separator(self, text: str, i: int) -> int:
        if text[i] == "{":  # V3.1: the arguments right after the name
            self._start_arguments(self._head, [CALL_END])
            return i
        self._name = ""  # V3: the head was the type; the name follows, to its newline
        self._steps = []
        return i

    def _feed_name(self, text: str, i: int) -> int:
        assert self._name is not None
        c = text[i]
        if c != "\n":
            self._name += c
            if len(self._name) > MAX_HEAD:
                self.status = "error"
            return i + 1
        self._steps = [FENCE_OPEN, ARGS, FENCE_CLOSE, CALL_END]
        return i + 1

    def _feed_step(self, text: str, i: int) -> int:
        step = self._steps[0]
        c = text[i]
        if step == AFTER_SEP:
            self._steps = []
            return self._after_separator(text, i)
        if not self._matched and c in WS:
            return i + 1  # whitespace before a literal or the arguments
        if step == ARGS:
            self._start_arguments((self._name or "").strip(), self._steps[1:])
            return i
        if not step.startswith(self._matched + c):
            self.status = "error"
            return i
        self._matched += c
        if self._matched == step:
            self._matched = ""
            self._steps = self._steps[1:]
            if not self._steps:
                self.status = "done"
        return i + 1

    def _start_arguments(self, name: str, then: list[str]) -> None:
        if not _plain(name):
            self.status = "error"
            return
        self.call.name = name
        self.call.streamable = True
        self._scanner = JsonScanner()
        self._steps = then

    def _feed_arguments(self, text: str, i: int) -> int:
        assert self._scanner is not None
        j = self._scanner.feed(text, i)
        self._raw += text[i:j]
        self.call.streamed += text[i:j]
        if self._scanner.status == "error":
            self.status = "error"
        elif self._scanner.status == "done":
            self._scanner = None
            self.call.arguments = arguments_text(self._raw)
            if self.call.arguments is None:
                self.status = "error"
        return j


ARGS = "\x00args"  # a step: the arguments object
AFTER_SEP = "\x00after_sep"  # a step: what follows the separator decides the form


def _plain(name: str) -> bool:
    """A type or name: no markup, no JSON, one line."""
    return bool(name) and not any(ch in name for ch in "<>{}\n｜")
