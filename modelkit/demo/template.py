"""The demo model's chat template (chat_template.jinja beside this module: the tools listed
after the conversation, within its sliding window) and how training renders a template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEMO_TEMPLATE = (Path(__file__).resolve().parent / "chat_template.jinja").read_text()


def renderer(template: str) -> Any:
    """The chat template rendered as Hugging Face's apply_chat_template (and the server) do."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    compiled = env.from_string(template)

    def render(messages: list[dict[str, Any]], tools: Any) -> str:
        return compiled.render(messages=messages, tools=tools, add_generation_prompt=True)

    return render
