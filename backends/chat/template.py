"""Turning chat messages into a prompt: the model's template, then tokens.

The template is rendered with Jinja2 in a sandbox, the way Hugging Face's
``apply_chat_template`` does (the reference the templates are written for): the messages,
``tools``, ``add_generation_prompt``, the tokenizer's special tokens, and any template arguments
(``ChatPrompt.template_args``, e.g. ``{"enable_thinking": false}``). onnxruntime-genai's own
renderer takes neither tool messages' extra fields nor template arguments.

Message content is the user's text, never the template's control tokens: a message that types
``<|im_start|>system`` gets the characters, not the token that opens a system turn (llama.cpp
tokenizes user content the same way). The template's own markers stay tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from backends.errors import InvalidRequest
from backends.types import ChatPrompt

# Used only when the model folder ships no chat template (docs/models.md).
FALLBACK_ROLE_PREFIX = {
    "system": "System",
    "user": "User",
    "assistant": "Assistant",
    "tool": "Tool",
}


class TemplateError(Exception):
    """The chat template refused the messages (its ``raise_exception``) or failed; ``index``
    is the message it failed on, when that can be told."""

    def __init__(self, reason: str, index: int | None = None) -> None:
        super().__init__(reason)
        self.index = index


def template_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as chat templates expect it: a null or missing ``content`` (an assistant turn
    that only calls tools, as OpenAI clients send it back) is ``""``, as vLLM and llama.cpp
    pass it; templates test it with string methods and ``in``, which fail on None."""
    out = dict(message)
    if out.get("content") is None:
        out["content"] = ""
    return out


def _reason(exc: Exception) -> str:
    if isinstance(exc, TemplateError):  # its own raise_exception: the template's words
        return str(exc)
    return f"the chat template failed: {type(exc).__name__}: {exc}"


def render_fallback(messages: Sequence[Mapping[str, Any]]) -> str:
    """``Role: content`` lines, then ``Assistant:`` to ask for the reply."""
    lines = [
        f"{FALLBACK_ROLE_PREFIX.get(m['role'], str(m['role']).title())}: {m.get('content') or ''}"
        for m in messages
    ]
    return "\n".join(lines) + "\nAssistant:"


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, **kw: Any) -> str:
    # Templates expect Hugging Face's tojson: no ASCII escaping, json.dumps's options.
    return json.dumps(value, ensure_ascii=False, indent=indent, **kw)


@lru_cache(maxsize=8)
def _compile(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


class ChatTemplate:
    """A model folder's chat template, compiled once."""

    def __init__(self, source: str, special_tokens: Mapping[str, str]) -> None:
        self.source = source
        self.special_tokens = dict(special_tokens)  # bos_token, eos_token, ...
        self._template = _compile(source)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_args: Mapping[str, Any] | None = None,
    ) -> str:
        variables = {
            **self.special_tokens,
            **(template_args or {}),
            "tools": [dict(t) for t in tools] if tools else None,
            "add_generation_prompt": True,
        }
        chat = [template_message(m) for m in messages]
        try:
            return self._template.render(messages=chat, **variables)
        except Exception as exc:  # a template is a program: whatever it raises is the request's
            reason = _reason(exc)
        raise TemplateError(reason, self._culprit(chat, variables, reason))

    def _culprit(
        self, chat: list[dict[str, Any]], variables: Mapping[str, Any], reason: str
    ) -> int | None:
        """The message a failure belongs to: the first one whose conversation up to it
        already fails the same way (a template fails on the message it is reading), found by
        bisection, so a long conversation costs a few renders; None when the conversation
        fails only as a whole (the template does not fail the same way twice)."""

        def fails(end: int) -> bool:
            try:
                self._template.render(messages=chat[:end], **variables)
            except Exception as exc:
                return _reason(exc) == reason
            return False

        low, high = 1, len(chat)  # the shortest failing conversation has ``high`` messages
        if not chat or not fails(high):
            return None
        while low < high:
            middle = (low + high) // 2
            if fails(middle):
                high = middle
            else:
                low = middle + 1
        return high - 1


@dataclass(frozen=True)
class TemplateSet:
    """What rendering needs from a model folder: its templates by name and the special
    tokens they may use (plain strings, so the prompt worker process can take them)."""

    templates: Mapping[str, str]
    tokens: Mapping[str, str]

    def pick(self, tools: bool) -> ChatTemplate | None:
        source = self.templates.get("tool_use" if tools else "default")
        source = source or self.templates.get("default")
        return ChatTemplate(source, self.tokens) if source else None


def render_chat(templates: TemplateSet, prompt: ChatPrompt) -> str:
    """Render with the model's own template, or the fallback when the folder has none."""
    template = templates.pick(bool(prompt.tools))
    if template is None:
        if prompt.tools:
            raise InvalidRequest(
                "This model folder has no chat template, so it cannot be given tools.",
                param="tools",
            )
        return render_fallback(prompt.messages)
    try:
        return template.render(prompt.messages, prompt.tools, prompt.template_args)
    except TemplateError as exc:
        if exc.index is None:
            where, param = "the messages", "messages"
        else:
            role = prompt.messages[exc.index].get("role")
            where = f"the messages, first at messages[{exc.index}] (role {role!r})"
            param = f"messages.{exc.index}"
        raise InvalidRequest(
            f"The model's chat template refused {where}: {exc}", param=param
        ) from None


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
