"""Thinking split from the answer: Qwen3, DeepSeek-R1 distills, Phi-4-reasoning, Magistral."""

from __future__ import annotations

import pytest

from backends.chat.parsers import (
    ContentDelta,
    ParsedOutput,
    ReasoningDelta,
    ReasoningOutput,
    ToolCall,
    get_reasoning_parser,
    get_tool_parser,
)
from backends.chat.parsers.reasoning import ReasoningParser
from tests.backends.chat.parsers.streaming import splits

pytestmark = pytest.mark.unit

THINK = get_reasoning_parser("think")

QWEN3 = (
    "<think>\nThe user asks for 17 * 23. 17 * 20 = 340, 17 * 3 = 51, total 391.\n</think>\n\n"
    "17 × 23 = **391**."
)
QWEN3_SPLIT = ReasoningOutput(
    "The user asks for 17 * 23. 17 * 20 = 340, 17 * 3 = 51, total 391.", "17 × 23 = **391**."
)
# Qwen3 with enable_thinking=False: the template closed an empty block in the prompt.
QWEN3_NO_THINKING = "17 × 23 = 391."
# A DeepSeek-R1 distill: its template ends the prompt with "<think>\n".
R1 = "Okay, so I need to multiply 17 by 23.\n\nThat gives 391.\n</think>\n\nThe answer is 391."
R1_SPLIT = ReasoningOutput(
    "Okay, so I need to multiply 17 by 23.\n\nThat gives 391.", "The answer is 391."
)
PHI4_REASONING = "<think>Let me compute: 17 times 23 is 391.</think>\n\nSolution: 391 \\boxed{391}"
PHI4_SPLIT = ReasoningOutput("Let me compute: 17 times 23 is 391.", "Solution: 391 \\boxed{391}")

CASES = {
    "qwen3": (QWEN3, False, QWEN3_SPLIT),
    "qwen3_no_thinking": (QWEN3_NO_THINKING, False, ReasoningOutput("", QWEN3_NO_THINKING)),
    "r1_opened_by_template": (R1, True, R1_SPLIT),
    "r1_repeats_the_open_tag": ("<think>\n" + R1, True, R1_SPLIT),
    "phi4_reasoning": (PHI4_REASONING, False, PHI4_SPLIT),
    "empty_thinking": ("<think>\n\n</think>\n\nHi!", False, ReasoningOutput("", "Hi!")),
    "cut_while_thinking": (
        "<think>\nStill thinking about th",
        False,
        ReasoningOutput("Still thinking about th", ""),
    ),
    "cut_inside_the_end_tag": (
        "<think>\nalmost done\n</thi",
        False,
        ReasoningOutput("almost done\n</thi", ""),
    ),
    "no_reasoning_model": (
        "  Plain answer with <think> tags mentioned </think> later.\n",
        False,
        ReasoningOutput("", "  Plain answer with <think> tags mentioned </think> later.\n"),
    ),
    "tag_only_counts_at_the_start": (
        "Well <think>no</think>",
        False,
        ReasoningOutput("", "Well <think>no</think>"),
    ),
    "end_tag_in_the_answer_stays": (
        "<think>a</think>The tag </think> closes thinking.",
        False,
        ReasoningOutput("a", "The tag </think> closes thinking."),
    ),
    "output_like_a_tag_prefix": ("<thin", False, ReasoningOutput("", "<thin")),
    "empty_output": ("", False, ReasoningOutput("", "")),
    "empty_output_opened": ("", True, ReasoningOutput("", "")),
}


@pytest.mark.parametrize("name", CASES)
def test_extract(name: str) -> None:
    text, opened, expected = CASES[name]
    assert THINK.extract(text, starts_in_reasoning=opened) == expected


@pytest.mark.parametrize("name", CASES)
def test_streaming_in_any_pieces_gives_the_same_split(name: str) -> None:
    text, opened, expected = CASES[name]
    for way, pieces in splits(text).items():
        stream = THINK.stream(starts_in_reasoning=opened)
        events = [e for piece in pieces for e in stream.feed(piece)] + stream.finish()
        assert all(e.text for e in events), way
        assert ReasoningOutput.from_events(events) == expected, way


def test_tags_never_show_while_streaming() -> None:
    stream = THINK.stream()
    shown = [e for c in QWEN3 for e in stream.feed(c)] + stream.finish()
    assert not any("<" in e.text and "think" in e.text for e in shown)
    assert isinstance(shown[0], ReasoningDelta)
    assert isinstance(shown[-1], ContentDelta)


def test_the_prompt_tells_whether_the_output_starts_inside_the_thinking() -> None:
    assert THINK.opened_by("<｜User｜>Hi<｜Assistant｜><think>\n")
    assert not THINK.opened_by("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not THINK.opened_by("<|im_start|>assistant\n")


def test_magistral_tags() -> None:
    parser = get_reasoning_parser("mistral")
    text = "[THINK]Two plus two is four.[/THINK]The answer is 4."
    assert parser.extract(text) == ReasoningOutput("Two plus two is four.", "The answer is 4.")


def test_content_goes_on_to_the_tool_call_stream() -> None:
    # Qwen3 thinks, then calls: thinking first, the answer's calls parsed from its content.
    text = (
        "<think>\nI need the weather in Paris.\n</think>\n\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    )
    for way, pieces in splits(text).items():
        thinking = THINK.stream()
        calls = get_tool_parser("hermes").stream()
        reasoning, tool_events = [], []
        for piece in [*pieces, None]:
            events = thinking.feed(piece) if piece is not None else thinking.finish()
            for event in events:
                if isinstance(event, ReasoningDelta):
                    reasoning.append(event.text)
                else:
                    tool_events += calls.feed(event.text)
        tool_events += calls.finish()
        assert "".join(reasoning) == "I need the weather in Paris.", way
        assert ParsedOutput.from_events(tool_events) == ParsedOutput(
            "", [ToolCall("get_weather", '{"city": "Paris"}')]
        ), way


def test_custom_tags() -> None:
    parser = ReasoningParser("<reasoning>", "</reasoning>")
    assert parser.extract("<reasoning>x</reasoning>y") == ReasoningOutput("x", "y")
