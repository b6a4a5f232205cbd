"""Anthropic's Messages API: the content blocks a request's messages carry.

Content this server cannot read (documents and the like) is refused with a 400 that names the
block, never dropped.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel, shown

_TEXT_ONLY = {"document", "search_result", "container_upload"}


def _known_block(allowed: frozenset[str]) -> Any:
    """A block's ``type`` checked before the union is tried, so an unsupported one is one clear
    error at its own index (not one per member of the union)."""

    def check(value: Any) -> Any:
        if isinstance(value, dict) and value.get("type") not in allowed:
            kind = value.get("type")
            if kind in _TEXT_ONLY:
                raise PydanticCustomError(
                    "unsupported_block",
                    "'{type}' blocks are not supported: this server reads text and images",
                    {"type": shown(kind)},
                )
            raise PydanticCustomError(
                "unsupported_block",
                "'{type}' blocks are not supported here; expected one of: {allowed}",
                {"type": shown(kind), "allowed": ", ".join(sorted(allowed))},
            )
        return value

    return BeforeValidator(check)


def as_blocks(value: Any) -> Any:
    """A string is shorthand for one text block (as Anthropic reads it)."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if not isinstance(value, list):
        raise PydanticCustomError("content_type", "must be a string or a list of content blocks")
    return value


# ---- request blocks ------------------------------------------------------------------------
class CacheControl(RequestModel):
    """Accepted and not needed: prompt prefixes are reused automatically (docs/operations.md)."""

    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class TextBlockParam(RequestModel):
    type: Literal["text"]
    text: str
    cache_control: CacheControl | None = None
    citations: list[Any] | None = Field(None, description="Accepted; not used.")


class ToolUseBlockParam(RequestModel):
    """A call the assistant made (assistant turns only)."""

    type: Literal["tool_use"]
    id: str = Field(..., min_length=1)
    name: str = Field(..., min_length=1)
    input: dict[str, Any]
    cache_control: CacheControl | None = None


ToolResultContent = Annotated[TextBlockParam, _known_block(frozenset({"text"}))]


class ToolResultBlockParam(RequestModel):
    """A call's result (user turns only)."""

    type: Literal["tool_result"]
    tool_use_id: str = Field(..., min_length=1)
    content: Annotated[list[ToolResultContent], BeforeValidator(as_blocks)] = Field(
        default_factory=list, description="A string, or text blocks (joined with newlines)."
    )
    is_error: bool = Field(False, description="The result is shown to the model as an error.")
    cache_control: CacheControl | None = None


class ThinkingBlockParam(RequestModel):
    """Thinking from an earlier turn, sent back as received: accepted, not shown to the model
    (chat templates drop earlier turns' thinking)."""

    type: Literal["thinking"]
    thinking: str
    signature: str = ""
    cache_control: CacheControl | None = None


class RedactedThinkingBlockParam(RequestModel):
    type: Literal["redacted_thinking"]
    data: str
    cache_control: CacheControl | None = None


class Base64ImageSource(RequestModel):
    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str = Field(..., min_length=1)


class UrlImageSource(RequestModel):
    type: Literal["url"]
    url: str = Field(
        ...,
        min_length=1,
        description="Fetched only from hosts in GENAI_IMAGE_URL_HOSTS (none by default).",
    )


class ImageBlockParam(RequestModel):
    """An image (user turns): base64 data or a URL the server may fetch."""

    type: Literal["image"]
    source: Annotated[Base64ImageSource | UrlImageSource, Field(discriminator="type")]
    cache_control: CacheControl | None = None


_BLOCK_TYPES = frozenset(
    {"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"}
)
ContentBlockParam = Annotated[
    Annotated[
        TextBlockParam
        | ImageBlockParam
        | ToolUseBlockParam
        | ToolResultBlockParam
        | ThinkingBlockParam
        | RedactedThinkingBlockParam,
        Field(discriminator="type"),
    ],
    _known_block(_BLOCK_TYPES),
]
# Which blocks each role may send.
_ROLE_BLOCKS: dict[str, frozenset[str]] = {
    "user": frozenset({"text", "image", "tool_result"}),
    "assistant": frozenset({"text", "tool_use", "thinking", "redacted_thinking"}),
    "system": frozenset({"text"}),
}


class MessageParam(RequestModel):
    role: Literal["user", "assistant", "system"] = Field(
        description="`system` messages go into the chat as they are placed."
    )
    content: Annotated[list[ContentBlockParam], BeforeValidator(as_blocks)] = Field(
        description="A string, or content blocks: `text`; `tool_use` and `thinking` in "
        "assistant turns; `image` and `tool_result` in user turns."
    )

    @field_validator("content")
    @classmethod
    def _blocks_fit_the_role(
        cls, value: list[ContentBlockParam], info: ValidationInfo
    ) -> list[ContentBlockParam]:
        role = info.data.get("role")
        allowed = _ROLE_BLOCKS.get(role or "", frozenset())
        for block in value:
            if role is not None and block.type not in allowed:
                raise PydanticCustomError(
                    "block_role",
                    "{type} blocks cannot be in a {role} turn",
                    {"type": block.type, "role": role},
                )
        return value
