"""Turning chat messages into a prompt string."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Message = dict[str, str]

# Used only when the model folder ships no chat template; documented in the README.
FALLBACK_ROLE_PREFIX = {
    "system": "System",
    "user": "User",
    "assistant": "Assistant",
    "tool": "Tool",
}


def render_fallback(messages: Sequence[Message]) -> str:
    """``Role: content`` lines, then ``Assistant:`` to ask for the reply."""
    lines = [
        f"{FALLBACK_ROLE_PREFIX.get(m['role'], m['role'].title())}: {m['content']}"
        for m in messages
    ]
    return "\n".join(lines) + "\nAssistant:"


def render_chat(tokenizer: Any, messages: Sequence[Message], *, has_template: bool) -> str:
    """Render with the model's own template (``tokenizer.apply_chat_template``) or the fallback."""
    if not has_template:
        return render_fallback(messages)
    return str(
        tokenizer.apply_chat_template(json.dumps(list(messages)), add_generation_prompt=True)
    )
