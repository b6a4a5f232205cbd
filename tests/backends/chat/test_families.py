"""A whole tool loop (system, user, an assistant call with ``content: null``, the tool's
result, the assistant's answer) rendered by the server with each family's published chat
template, compared character for character with what ``transformers``' apply_chat_template
made of the same conversation with ``content: ""`` (families/renders.json, recorded at build
time by modelkit/template_renders.py; where each template comes from: families/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backends.chat.parsers import ToolCall, get_tool_parser
from backends.chat.template import TemplateSet, render_chat
from routes.door.convert import chat_prompt
from schemas.openai.request import ChatCompletionRequest

pytestmark = pytest.mark.unit

HERE = Path(__file__).parent / "families"
LOOP = json.loads((HERE / "tool_loop.json").read_text(encoding="utf-8"))
FAMILIES: dict[str, dict[str, Any]] = json.loads(
    (HERE / "families.json").read_text(encoding="utf-8")
)["families"]
RENDERS: dict[str, str] = json.loads((HERE / "renders.json").read_text(encoding="utf-8"))["renders"]


def family_templates(name: str) -> TemplateSet:
    family = FAMILIES[name]
    source = (HERE / "templates" / family["template"]).read_text(encoding="utf-8")
    return TemplateSet({"default": source}, family["tokens"])


def test_every_family_was_recorded() -> None:
    assert set(RENDERS) == {*FAMILIES, "llama3_1_builtin"}
    assert len(FAMILIES) == 9


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_tool_loop_renders_as_transformers_renders_it(name: str) -> None:
    # Through the OpenAI door's own conversion: the client's body, as a client sends it back.
    body = ChatCompletionRequest.model_validate(
        {"messages": LOOP["request"], "tools": LOOP["tools"]}
    )
    prompt = chat_prompt(body.messages, body.tools)
    assert render_chat(family_templates(name), prompt) == RENDERS[name]


BUILTIN = json.loads((HERE / "builtin_loop.json").read_text(encoding="utf-8"))


def test_a_llama_built_in_tool_loop_renders_and_its_call_parses_back() -> None:
    body = ChatCompletionRequest.model_validate({"messages": BUILTIN["request"]})
    prompt = chat_prompt(body.messages, None, BUILTIN["template_args"])
    text = render_chat(family_templates(BUILTIN["family"]), prompt)
    assert text == RENDERS["llama3_1_builtin"]
    # What the template writes for the call is what the parser reads back as that call.
    written = text[text.index("<|python_tag|>") : text.index("<|eom_id|>")]
    parsed = get_tool_parser("llama3_json").extract(written)
    assert parsed.content == ""
    assert parsed.calls == [ToolCall("brave_search", '{"query": "weather in Paris"}')]
