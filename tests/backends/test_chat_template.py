from __future__ import annotations

import json

import pytest

from backends.chat_template import render_chat, render_fallback
from backends.errors import InvalidRequest
from backends.request import ChatPrompt


@pytest.mark.unit
def test_fallback_format() -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render_fallback(msgs) == "System: Be brief.\nUser: Hi\nAssistant:"


@pytest.mark.model
def test_model_template_is_used(oracle) -> None:
    msgs = [{"role": "user", "content": "Hi"}]
    text = render_chat(oracle.tokenizer, ChatPrompt(msgs), has_template=True)
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.model
def test_fallback_used_without_template(oracle) -> None:
    msgs = [{"role": "user", "content": "Hi"}]
    assert render_chat(oracle.tokenizer, ChatPrompt(msgs), has_template=False) == (
        "User: Hi\nAssistant:"
    )


class RecordingTokenizer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def apply_chat_template(self, messages: str, *, tools: str | None, **kw: object) -> str:
        self.calls.append((messages, tools))
        return "rendered"


@pytest.mark.unit
def test_tools_reach_the_template_as_json() -> None:
    tok = RecordingTokenizer()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    prompt = ChatPrompt([{"role": "user", "content": "Hi"}], tools=tools)
    assert render_chat(tok, prompt, has_template=True) == "rendered"
    [(messages, sent)] = tok.calls
    assert json.loads(messages) == [{"role": "user", "content": "Hi"}]
    assert sent is not None and json.loads(sent) == tools
    render_chat(tok, ChatPrompt([{"role": "user", "content": "Hi"}]), has_template=True)
    assert tok.calls[-1][1] is None


@pytest.mark.unit
def test_what_the_renderer_cannot_do_is_refused() -> None:
    msgs = [{"role": "user", "content": "Hi"}]
    with pytest.raises(InvalidRequest) as exc:
        render_chat(RecordingTokenizer(), ChatPrompt(msgs, tools=[{}]), has_template=False)
    assert exc.value.param == "tools"
    with pytest.raises(InvalidRequest) as exc:
        prompt = ChatPrompt(msgs, template_args={"enable_thinking": False})
        render_chat(RecordingTokenizer(), prompt, has_template=True)
    assert exc.value.param == "chat_template_kwargs"
