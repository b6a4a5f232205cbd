"""The streaming engine all formats share: hold-back, recovery, and ``stream_arguments``."""

from __future__ import annotations

import random

import pytest

from backends.chat.parsers import (
    ContentDelta,
    FailedCall,
    ParsedOutput,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallStart,
    get_tool_parser,
    tool_parser_names,
)
from tests.backends.chat.parsers.streaming import run, splits, streamed

pytestmark = pytest.mark.unit

HERMES = get_tool_parser("hermes")
CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
)


def test_text_that_may_start_a_marker_is_held_back_until_known() -> None:
    stream = HERMES.stream()
    assert stream.feed("Sure <tool") == [ContentDelta("Sure")]  # " <tool" may open a call
    assert stream.feed("box> is fine") == [ContentDelta(" <toolbox> is fine")]
    assert stream.finish() == []


def test_no_piece_of_a_call_shows_as_content() -> None:
    text = "Let me look.\n" + CALL
    for way, pieces in splits(text).items():
        events = run(HERMES, pieces)
        content = "".join(e.text for e in events if isinstance(e, ContentDelta))
        assert content == "Let me look.", way


def test_by_default_a_call_is_announced_whole_when_its_block_ends() -> None:
    stream = HERMES.stream()
    events = [stream.feed(c) for c in CALL]
    first_event_at = next(i for i, e in enumerate(events) if e)
    assert first_event_at == len(CALL) - 1  # the ">" of </tool_call>
    assert events[first_event_at] == [
        ToolCallStart(0, "get_weather"),
        ToolCallArgumentsDelta(0, '{"city": "Paris", "days": 3}'),
    ]


def test_stream_arguments_announces_the_name_then_streams_the_arguments() -> None:
    events = run(HERMES, list(CALL), stream_arguments=True)
    assert events[0] == ToolCallStart(0, "get_weather")
    deltas = [e.text for e in events[1:] if isinstance(e, ToolCallArgumentsDelta)]
    assert len(deltas) == len('{"city": "Paris", "days": 3}')
    assert "".join(deltas) == '{"city": "Paris", "days": 3}'


def test_stream_arguments_waits_for_a_name_that_comes_after_the_arguments() -> None:
    text = '<tool_call>{"arguments": {"a": 1}, "name": "f"}</tool_call>'
    stream = HERMES.stream(stream_arguments=True)
    events = [stream.feed(c) for c in text]
    announced_at = next(i for i, e in enumerate(events) if e)
    assert text[: announced_at + 1].endswith('"f"}')
    assert events[announced_at] == [ToolCallStart(0, "f"), ToolCallArgumentsDelta(0, '{"a": 1}')]


def test_stream_arguments_keeps_a_call_that_breaks_after_it_was_announced() -> None:
    # An announced call cannot be taken back: it keeps what was streamed, the rest is content.
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1 oops'
    events = run(HERMES, list(text), stream_arguments=True)
    assert ParsedOutput.from_events(events) == ParsedOutput("oops", [ToolCall("f", '{"a": 1 ')])
    # Without it, the broken block is content, exactly.
    assert streamed(HERMES, list(text)) == ParsedOutput(text)


def test_call_indices_run_over_the_whole_output() -> None:
    text = CALL + "\nand\n" + CALL
    events = run(HERMES, [text])
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [s.index for s in starts] == [0, 1]


def test_whitespace_between_text_and_calls_is_not_content() -> None:
    assert HERMES.extract("\n\n" + CALL + "\n\n").content == ""
    assert HERMES.extract("A \n" + CALL + "\n B").content == "A\n B"


def test_a_text_without_calls_is_unchanged_whitespace_included() -> None:
    text = "  Hello,\n\n  world <tool_call\n\n"
    for name in tool_parser_names():
        parser = get_tool_parser(name)
        for way, pieces in splits(text).items():
            assert streamed(parser, pieces) == ParsedOutput(text), (name, way)


FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<|tool_call|>",
    "<|/tool_call|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<|python_tag|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "```json\n",
    "```",
    'brave_search.call(query="x")',
    '{"name": "f", ',
    '"arguments": ',
    '"parameters": ',
    '{"a": [1, "}"]}',
    "}",
    "]",
    "[",
    "{",
    ";",
    ", ",
    "\n",
    " ",
    "text",
    "get_time",
    '"',
    "\\",
]


# Whole calls of each format, so random outputs also hold calls, and calls next to junk.
CALLS = {
    "deepseek_v3": [
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{"a": 1}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>g<｜tool▁sep｜>{"b": "}"}<｜tool▁call▁end｜>',
    ],
    "hermes": [
        '<tool_call>\n{"name": "f", "arguments": {"a": [1, "}"]}}\n</tool_call>',
        '<tool_call>{"name": "g"}</tool_call>',
    ],
    "llama3_json": [
        '{"name": "f", "parameters": {"a": 1}}',
        '<|python_tag|>{"name": "g", "parameters": {}}',
        "<|python_tag|>brave_search.call(query='a)b', n=[1, (2)])",
        '; {"name": "h", "parameters": {"b": "x"}}',
    ],
    "mistral": [
        '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]',
        '[TOOL_CALLS]g[ARGS]{"b": [2]}',
    ],
    "phi4_mini_json": ['<|tool_call|>[{"name": "f", "arguments": {"a": 1}}]<|/tool_call|>'],
}


@pytest.mark.parametrize("name", tool_parser_names())
def test_random_output_never_raises_and_streams_like_extract(name: str) -> None:
    parser = get_tool_parser(name)
    rng = random.Random(name)
    pieces = FRAGMENTS + CALLS[name] * 4
    with_calls = 0
    for _ in range(150):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        whole = parser.extract(text)
        with_calls += bool(whole.calls)
        if not whole.calls:
            assert whole.content == text  # nothing is lost
        for way in ("chars", "words", "random0"):
            assert streamed(parser, splits(text)[way]) == whole, (text, way)
            run(parser, splits(text)[way], stream_arguments=True)  # never raises
    assert with_calls > 15


# ---- calls a grammar held (calls_held) -----------------------------------------------------
def _held_cut(cut: int) -> ParsedOutput:
    """What "Let me look." then ``CALL`` cut after ``cut`` characters gives, with the calls
    held by a grammar: the call if its body was whole, else a failed call (named once the
    name was read); never the call's text as content."""
    body_end = CALL.rindex("}") + 1
    if cut >= body_end:  # only the closing marker was cut: the call stands
        return ParsedOutput(
            "Let me look.", [ToolCall("get_weather", '{"city": "Paris", "days": 3}')]
        )
    named = cut >= CALL.index('"get_weather"') + len('"get_weather"')
    return ParsedOutput("Let me look.", [], [FailedCall("get_weather" if named else None)])


def test_a_held_call_the_output_ends_inside_is_a_failed_call_never_content() -> None:
    for cut in range(len("<tool_call>"), len(CALL)):
        text = "Let me look.\n" + CALL[:cut]
        expected = _held_cut(cut)
        assert HERMES.extract(text, calls_held=True) == expected, cut
        for way, pieces in splits(text).items():
            events = run(HERMES, pieces, calls_held=True)
            assert ParsedOutput.from_events(events) == expected, (cut, way)
            shown = "".join(e.text for e in events if isinstance(e, ContentDelta))
            assert shown == "Let me look.", (cut, way)  # not even for a moment
        # Without a grammar the broken block is released as content, as ever: nothing lost.
        if not expected.calls:
            assert HERMES.extract(text) == ParsedOutput(text), cut


def test_the_failed_call_says_why_the_output_ended() -> None:
    stream = HERMES.stream(calls_held=True)
    assert stream.feed('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par') == []
    assert stream.finish("the call did not fit in 9 tokens") == [
        FailedCall("get_weather", "the call did not fit in 9 tokens")
    ]


def test_held_calls_leave_whole_calls_and_plain_text_as_they_were() -> None:
    for text in ("Just an answer, <tool no call.", "Sure.\n" + CALL, CALL + "\n" + CALL):
        assert HERMES.extract(text, calls_held=True) == HERMES.extract(text), text
    cut = HERMES.extract("Sure.\n" + CALL + "\n" + CALL[:45], calls_held=True)
    assert cut.content == "Sure." and [c.name for c in cut.calls] == ["get_weather"]
    assert cut.failed == [FailedCall("get_weather")]


def test_the_whole_calls_of_a_cut_block_stand() -> None:
    mistral = get_tool_parser("mistral")
    first = '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}'
    assert mistral.extract(first, calls_held=True) == ParsedOutput("", [ToolCall("f", '{"a": 1}')])
    cut = mistral.extract(first + ', {"name": "g", "arguments": {"b"', calls_held=True)
    assert cut == ParsedOutput("", [ToolCall("f", '{"a": 1}')], [FailedCall("g")])
    assert mistral.extract("[TOOL_CALLS]", calls_held=True) == ParsedOutput(
        "", [], [FailedCall(None)]
    )


@pytest.mark.parametrize("name", tool_parser_names())
def test_every_format_reports_a_held_call_cut_in_its_arguments(name: str) -> None:
    parser = get_tool_parser(name)
    call = CALLS[name][0]
    text = "Here. " + call[: call.index("1")] if name != "llama3_json" else call[: call.index("1")]
    expected = ParsedOutput("Here." if name != "llama3_json" else "", [], [FailedCall("f")])
    for way, pieces in splits(text).items():
        assert streamed(parser, pieces, calls_held=True) == expected, way


@pytest.mark.parametrize("name", tool_parser_names())
def test_random_held_output_never_raises_and_streams_like_extract(name: str) -> None:
    parser = get_tool_parser(name)
    rng = random.Random(name + " held")
    pieces = FRAGMENTS + CALLS[name] * 4
    failed = 0
    for _ in range(150):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        text = text[: rng.randint(1, len(text))]  # an output cut anywhere
        whole = parser.extract(text, calls_held=True)
        failed += bool(whole.failed)
        if not (whole.failed or whole.calls):
            assert whole.content == text  # nothing lost
        for way in ("chars", "words", "random0"):
            assert streamed(parser, splits(text)[way], calls_held=True) == whole, (text, way)
    assert failed > 5
