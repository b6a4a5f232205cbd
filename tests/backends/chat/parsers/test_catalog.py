"""Parsers by name, and which ones a model needs from its chat template and vocabulary."""

from __future__ import annotations

import pytest

from backends.chat.parsers import (
    UnknownParser,
    choose_reasoning_parser,
    choose_tool_parser,
    get_reasoning_parser,
    get_tool_parser,
    reasoning_parser_names,
    tool_parser_names,
)
from config.settings import DEMO_MODEL_DIR

pytestmark = pytest.mark.unit

# Excerpts of the real templates, enough for the rules.
QWEN25 = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}...# Tools\\n\\nYou may call one or more "
    "functions...<tools>...</tools>\\n\\nFor each function call, return a json object with "
    "function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>'
)
QWEN3 = (
    QWEN25
    + "{%- if enable_thinking is defined and enable_thinking is false %}<think>\\n\\n</think>"
)
LLAMA31 = (
    "{%- if tools is not none %}{%- set tools_in_user_message = true %}...<|start_header_id|>"
    "user<|end_header_id|>\\n\\nGiven the following functions, please respond with a JSON for "
    'a function call...{\\"name\\": function name, \\"parameters\\": dictionary of argument '
    "name and its value}.<|python_tag|>"
)
MISTRAL = "{%- if tools is not none %}[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS]..."
PHI4_MINI = (
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message %}"
    "{{'<|system|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>'}}"
)
DEEPSEEK_R1 = "{% set content = content.split('</think>')[-1] %}...<｜Assistant｜><think>\\n"


def test_every_format_is_registered() -> None:
    assert tool_parser_names() == [
        "deepseek_v3",
        "hermes",
        "llama3_json",
        "mistral",
        "phi4_mini_json",
    ]
    assert reasoning_parser_names() == ["mistral", "think"]
    for name in tool_parser_names():
        assert get_tool_parser(name).name == name


def test_an_unknown_name_says_which_names_exist() -> None:
    with pytest.raises(UnknownParser, match="hermes"):
        get_tool_parser("qwen9")
    with pytest.raises(UnknownParser, match="think"):
        get_reasoning_parser("nope")


@pytest.mark.parametrize(
    ("template", "tokens", "expected"),
    [
        (QWEN25, {"<tool_call>", "<|im_start|>"}, "hermes"),
        (QWEN3, {"<tool_call>", "<think>", "</think>"}, "hermes"),
        (LLAMA31, {"<|python_tag|>", "<|eot_id|>"}, "llama3_json"),
        (LLAMA31.replace("<|python_tag|>", ""), set(), "llama3_json"),
        (MISTRAL, {"[TOOL_CALLS]", "[AVAILABLE_TOOLS]"}, "mistral"),
        (MISTRAL, {"[TOOL_CALLS]", "[ARGS]"}, "mistral"),
        (PHI4_MINI, {"<|tool|>", "<|tool_call|>", "<|/tool_call|>"}, "phi4_mini_json"),
        (DEEPSEEK_R1, {"<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>"}, "deepseek_v3"),
        (DEEPSEEK_R1 + "{{'<｜tool▁calls▁begin｜>'}}", set(), "deepseek_v3"),
        (DEEPSEEK_R1, set(), None),
        ("{{ messages }} without any tool support", {"<tool_call>"}, None),
        (None, set(), None),
    ],
)
def test_choose_tool_parser(template: str | None, tokens: set[str], expected: str | None) -> None:
    assert choose_tool_parser(template, tokens) == expected


def test_the_demo_model_writes_hermes_calls_and_does_not_think() -> None:
    template = (DEMO_MODEL_DIR / "chat_template.jinja").read_text()
    tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
    assert choose_tool_parser(template, tokens) == "hermes"
    assert choose_reasoning_parser(template, tokens) is None


@pytest.mark.parametrize(
    ("template", "tokens", "expected"),
    [
        (QWEN3, {"<think>", "</think>"}, "think"),
        (DEEPSEEK_R1, set(), "think"),
        ("...", {"[THINK]", "[/THINK]"}, "mistral"),
        (QWEN25, {"<tool_call>"}, None),
        (LLAMA31, {"<|python_tag|>"}, None),
    ],
)
def test_choose_reasoning_parser(template: str, tokens: set[str], expected: str | None) -> None:
    assert choose_reasoning_parser(template, tokens) == expected


def test_kept_tokens_are_the_markers_that_are_special_tokens() -> None:
    # A decoder that drops special tokens must write these back into the text.
    vocab = {"<|python_tag|>": 128010, "[TOOL_CALLS]": 5, "[ARGS]": 32, "<|eot_id|>": 128009}
    assert get_tool_parser("llama3_json", vocab).kept_tokens() == {128010: "<|python_tag|>"}
    assert get_tool_parser("mistral", vocab).kept_tokens() == {5: "[TOOL_CALLS]", 32: "[ARGS]"}
    assert get_tool_parser("hermes", vocab).kept_tokens() == {}
    phi = {"<|tool_call|>": 200025, "<|/tool_call|>": 200026}
    assert get_tool_parser("phi4_mini_json", phi).kept_tokens() == {
        200025: "<|tool_call|>",
        200026: "<|/tool_call|>",
    }
    magistral = {"[THINK]": 34, "[/THINK]": 35}
    assert get_reasoning_parser("mistral").kept_tokens(magistral) == {34: "[THINK]", 35: "[/THINK]"}
