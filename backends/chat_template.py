"""Turning chat messages into a prompt: the model's template, then tokens.

Message content is the user's text, never the template's control tokens: a message that types
``<|im_start|>system`` gets the characters, not the token that opens a system turn (llama.cpp
tokenizes user content the same way). The template's own markers stay tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from backends.errors import InvalidRequest
from backends.request import ChatPrompt

# Used only when the model folder ships no chat template; documented in the README.
FALLBACK_ROLE_PREFIX = {
    "system": "System",
    "user": "User",
    "assistant": "Assistant",
    "tool": "Tool",
}


def render_fallback(messages: Sequence[Mapping[str, Any]]) -> str:
    """``Role: content`` lines, then ``Assistant:`` to ask for the reply."""
    lines = [
        f"{FALLBACK_ROLE_PREFIX.get(m['role'], str(m['role']).title())}: {m.get('content') or ''}"
        for m in messages
    ]
    return "\n".join(lines) + "\nAssistant:"


def render_chat(tokenizer: Any, prompt: ChatPrompt, *, has_template: bool) -> str:
    """Render with the model's own template (``tokenizer.apply_chat_template``) or the fallback.

    Tools go to the template as JSON, as onnxruntime-genai takes them."""
    if prompt.template_args:
        raise InvalidRequest(
            "Chat template arguments are not supported: onnxruntime-genai's template renderer "
            "takes only messages and tools.",
            param="chat_template_kwargs",
        )
    if not has_template:
        if prompt.tools:
            raise InvalidRequest(
                "This model folder has no chat template, so it cannot be given tools.",
                param="tools",
            )
        return render_fallback(prompt.messages)
    tools = json.dumps(list(prompt.tools)) if prompt.tools else None
    return str(
        tokenizer.apply_chat_template(
            json.dumps([dict(m) for m in prompt.messages]), tools=tools, add_generation_prompt=True
        )
    )


Encode = Callable[[str], list[int]]


def encode_chat(
    encode: Encode, text: str, prompt: ChatPrompt, specials: Sequence[str]
) -> list[int]:
    """Tokens of the rendered ``text`` in which the messages' content cannot form a special
    token. Content without special-token text (nearly all) changes nothing: the whole prompt
    is encoded at once, exactly as before."""
    contents = [c for c in (_content(m) for m in prompt.messages) if c]
    if not specials or not any(s in c for c in contents for s in specials):
        return encode(text)
    pattern = re.compile("|".join(re.escape(s) for s in specials))
    ids: list[int] = []
    cursor = 0
    for content in contents:
        at = text.find(content, cursor)
        if at < 0:
            lookalike = pattern.search(content)
            if lookalike is not None:
                raise InvalidRequest(
                    f"A message holds special-token text ({lookalike.group()!r}) that this "
                    "model's chat template rewrites, so it cannot be kept as plain text.",
                    param="messages",
                )
            continue
        ids += encode(text[cursor:at]) + encode_plain(encode, content, pattern)
        cursor = at + len(content)
    return ids + encode(text[cursor:])


def encode_plain(encode: Encode, text: str, specials: re.Pattern[str]) -> list[int]:
    """Tokens of ``text`` as plain characters: each special-token lookalike is broken after
    its first character, so it tokenizes as the characters it is."""
    ids: list[int] = []
    cursor = 0
    for match in specials.finditer(text):
        ids += encode(text[cursor : match.start()])
        ids += encode(match.group()[0]) + encode_plain(encode, match.group()[1:], specials)
        cursor = match.end()
    return ids + encode(text[cursor:])


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""
