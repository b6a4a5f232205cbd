from __future__ import annotations

from backends.chat_template import render_chat, render_fallback


def test_fallback_format() -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render_fallback(msgs) == "System: Be brief.\nUser: Hi\nAssistant:"


def test_model_template_is_used(oracle) -> None:
    msgs = [{"role": "user", "content": "Hi"}]
    text = render_chat(oracle.tokenizer, msgs, has_template=True)
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_fallback_used_without_template(oracle) -> None:
    msgs = [{"role": "user", "content": "Hi"}]
    assert render_chat(oracle.tokenizer, msgs, has_template=False) == "User: Hi\nAssistant:"
