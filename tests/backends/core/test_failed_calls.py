"""A tool call a grammar held that the output ended inside (issue 48): which requests hold
their calls, and how the handle reports such a call: apart, with the reason, never as text."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from backends.chat.formats import ChatFormat
from backends.chat.parsers import FailedCall, get_tool_parser
from backends.core.handle import Choice, ChoiceDelta, RequestHandle, Result
from backends.core.planning import apply_tools
from backends.core.request import ChatPrompt, GenerationRequest
from backends.core.timing import RequestTimer
from backends.types import (
    FinishEvent,
    FinishReason,
    GeneratedToken,
    SamplingParams,
    SequenceDelta,
    Usage,
)

pytestmark = pytest.mark.unit

HERMES = ChatFormat(tools=get_tool_parser("hermes"))
TOOL = {
    "type": "function",
    "function": {
        "name": "exec_command",
        "parameters": {
            "type": "object",
            "properties": {"cmd": {"type": "string"}},
            "required": ["cmd"],
        },
    },
}
ASK = [{"role": "user", "content": "Run the command echo hello."}]
RUN_ON = [
    "Running it.\n",
    "<tool_call>\n",
    '{"name": "exec_command", ',
    '"arguments": {"cmd": "echo',
]


def _request(choice: str = "auto", num_beams: int = 1) -> GenerationRequest:
    sampling = SamplingParams(num_beams=num_beams)
    request = GenerationRequest(ChatPrompt(ASK, tools=[TOOL]), sampling, tool_choice=choice)
    return apply_tools(request, HERMES)


def test_a_grammar_holds_the_calls_of_auto_and_of_a_forced_call() -> None:
    assert _request("auto").calls_held
    assert _request("required").calls_held
    assert _request("exec_command").calls_held
    assert not _request("none").calls_held
    assert not _request("auto", num_beams=2).calls_held  # beam search runs no lazy grammar
    guided = GenerationRequest(
        ChatPrompt(ASK, tools=[TOOL]), SamplingParams(guidance=("json_schema", "{}"))
    )
    assert not apply_tools(guided, HERMES).calls_held  # response_format holds the output
    llama3 = ChatFormat(tools=get_tool_parser("llama3_json"))  # bare JSON calls: no trigger
    assert not apply_tools(GenerationRequest(ChatPrompt(ASK, tools=[TOOL])), llama3).calls_held


def _handle(
    pieces: Sequence[str],
    reason: FinishReason,
    *,
    held: bool,
    limit: int = 9,
    stop: str | None = None,
) -> tuple[Result, list[int], list[ChoiceDelta]]:
    """One choice's ``pieces``, then its end, through a handle read whole (its result) and
    through one read as a stream (its deltas, and the failed-call counts it reported)."""

    async def go() -> tuple[Result, list[int], list[ChoiceDelta]]:
        counted: list[int] = []

        def opened(on_failed: Callable[[int], None] = lambda count: None) -> RequestHandle:
            choice = Choice("r", 0, 0)
            timer = RequestTimer()
            handle = RequestHandle(
                "r",
                "m",
                [choice],
                timer,
                output_format=HERMES,
                calls_held=held,
                on_failed_calls=on_failed,
            )
            handle.token_limits = [limit]
            sink = handle.sink(choice)
            for k, text in enumerate(pieces):
                sink(SequenceDelta(text, GeneratedToken(k, text)))
            sink(FinishEvent(reason, Usage(5, len(pieces)), stop_sequence=stop))
            return handle

        deltas = [delta async for delta in opened(counted.append)]
        return await opened().result(), counted, deltas

    result, counted, deltas = asyncio.run(go())
    [choice] = result.choices
    # The stream agrees with the whole answer, and tells a failed call only at the end.
    assert "".join(d.text for d in deltas) == choice.text
    assert list(deltas[-1].failed_calls) == choice.failed_calls
    assert not any(d.failed_calls for d in deltas[:-1])
    return result, counted, deltas


def test_a_held_call_cut_by_the_room_is_a_failed_call_not_text() -> None:
    result, counted, deltas = _handle(RUN_ON, "length", held=True, limit=4)
    [choice] = result.choices
    assert (choice.text, choice.tool_calls, choice.finish_reason) == ("Running it.", [], "length")
    reason = "the call did not fit in the 4 tokens the request may generate"
    assert choice.failed_calls == [FailedCall("exec_command", reason)]
    assert "".join(d.text for d in deltas) == "Running it." and counted == [1]


def test_a_stop_string_that_cuts_a_held_call_is_named() -> None:
    result, counted, _ = _handle(RUN_ON, "stop", held=True, stop=" hello")
    [choice] = result.choices
    assert choice.finish_reason == "stop" and choice.text == "Running it."
    assert choice.failed_calls == [
        FailedCall("exec_command", "the stop string ' hello' ended the output inside the call")
    ]


def test_without_a_grammar_the_cut_call_is_text_as_before() -> None:
    result, counted, _ = _handle(RUN_ON, "length", held=False)
    [choice] = result.choices
    assert choice.text == "".join(RUN_ON) and choice.failed_calls == [] and counted == []


def test_a_call_that_fits_and_a_plain_answer_are_unchanged() -> None:
    whole = [*RUN_ON, ' hello"}}', "\n</tool_call>"]
    result, counted, _ = _handle(whole, "stop", held=True)
    [choice] = result.choices
    assert choice.finish_reason == "tool_calls" and choice.failed_calls == [] and counted == []
    assert [(c.name, c.arguments) for c in choice.tool_calls] == [
        ("exec_command", '{"cmd": "echo hello"}')
    ]
    result, counted, _ = _handle(["Hello", " there."], "length", held=True)
    [choice] = result.choices
    assert (choice.text, choice.failed_calls, choice.finish_reason) == (
        "Hello there.",
        [],
        "length",
    )
