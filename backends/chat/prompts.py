"""From a prompt to what the model reads: a chat rendered with the model's template, then
tokens.

Runs on the owner thread, in the one trip a request makes there, or for a very large prompt in
the prompt worker process (:mod:`backends.chat.prompt_worker`), which has its own tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from backends.chat.template import TemplateSet, encode_chat, render_chat
from backends.errors import InvalidRequest
from backends.models.folder import ModelFolder
from backends.models.loader import LoadedModel
from backends.types import ChatPrompt, PreparedPrompt, Prompt, TextPrompt


def templates_of(folder: ModelFolder) -> TemplateSet:
    return TemplateSet(folder.chat_templates, folder.template_tokens)


def prepare_prompt(model: LoadedModel, prompt: Prompt, param: str) -> PreparedPrompt:
    folder = model.folder
    return render_and_encode(
        model.tokenizer, templates_of(folder), folder.special_tokens, prompt, param
    )


def render_and_encode(
    tokenizer: Any, templates: TemplateSet, specials: Sequence[str], prompt: Prompt, param: str
) -> PreparedPrompt:
    """The prompt's text and tokens; ``param`` is the client's name for the prompt."""

    def encode(text: str) -> list[int]:
        return [int(t) for t in tokenizer.encode(text)] if text else []

    if isinstance(prompt, ChatPrompt):
        text = render_chat(templates, prompt)
        ids = encode_chat(encode, text, prompt, specials)
    else:
        text = prompt.text
        ids = encode(text)
    if not ids:
        raise InvalidRequest("The prompt is empty: it has no tokens.", param=param)
    return PreparedPrompt(text, ids)


def prompt_chars(prompt: Prompt) -> int:
    """Characters of what the client sent (the template's own text not counted)."""
    if isinstance(prompt, TextPrompt):
        return len(prompt.text)
    content = sum(len(str(m.get("content") or "")) for m in prompt.messages)
    return content + len(json.dumps(list(prompt.tools))) if prompt.tools else content
