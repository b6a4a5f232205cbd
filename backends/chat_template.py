"""Turning chat messages into a prompt string."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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
