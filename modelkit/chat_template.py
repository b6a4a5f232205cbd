"""The kit's ChatML chat template (chat_template.jinja beside this module): ChatML with
Qwen2.5's tool calling (<tool_call> JSON), so the tiny models can be given tools; without
tools it renders exactly the plain ChatML turns."""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (Path(__file__).resolve().parent / "chat_template.jinja").read_text()
