"""Chat Completions fields that clients send as metadata or hints: accepted and ignored for a
stated reason, or mapped onto what the model has (docs/api/field-policy.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]


def thinking_switch(effort: str | None) -> dict[str, Any] | None:
    """A reasoning effort as the chat template's thinking switch: ``none`` and ``minimal``
    turn thinking off, any other effort on. A template without the switch ignores it."""
    if effort is None:
        return None
    return {"enable_thinking": effort not in ("none", "minimal")}


def with_effort(effort: str | None, kwargs: dict[str, Any] | None) -> dict[str, Any] | None:
    """The chat template's variables: the effort's switch, the explicit ones over it."""
    mapped = thinking_switch(effort)
    if mapped is None:
        return kwargs
    return {**mapped, **(kwargs or {})}


class ChatHints(RequestModel):
    reasoning_effort: Effort | None = Field(
        None,
        description="Mapped: `none`/`minimal` turn the chat template's `enable_thinking` off, "
        "the others on (models without the switch ignore it); `chat_template_kwargs` win.",
    )
    verbosity: Literal["low", "medium", "high"] | None = Field(
        None, description="Accepted and ignored: the model has no verbosity setting."
    )
    store: bool | None = Field(
        None, description="Only false or null: this server keeps no completions."
    )
    metadata: dict[str, str] | None = Field(
        None, description="Accepted and ignored (nothing is stored to tag)."
    )
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = Field(
        None, description="Accepted and ignored: this server has one service tier."
    )
    prompt_cache_key: str | None = Field(
        None, description="Accepted and ignored: prompt prefixes are reused without it."
    )
    safety_identifier: str | None = Field(None, description="Accepted and ignored.")

    @field_validator("store")
    @classmethod
    def _nothing_stored(cls, value: bool | None) -> bool | None:
        if value:
            raise PydanticCustomError(
                "unsupported", "not supported: this server keeps no completions; send false"
            )
        return value
