"""Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens.

Requests forbid unknown fields, as on every route. Content this server cannot read (images,
documents, server tools) is refused with a 400 that names the block, never dropped. Hints that
have no effect here are accepted: ``cache_control`` (prefix reuse is automatic) and
``metadata``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from schemas.common import SEED_MAX, RequestModel

MAX_STOP_SEQUENCES = 16
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
                    {"type": kind},
                )
            raise PydanticCustomError(
                "unsupported_block",
                "'{type}' blocks are not supported here; expected one of: {allowed}",
                {"type": kind, "allowed": ", ".join(sorted(allowed))},
            )
        return value

    return BeforeValidator(check)


def _as_blocks(value: Any) -> Any:
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
    content: Annotated[list[ToolResultContent], BeforeValidator(_as_blocks)] = Field(
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
    content: Annotated[list[ContentBlockParam], BeforeValidator(_as_blocks)] = Field(
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


# ---- tools ---------------------------------------------------------------------------------
def _custom_tool(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") not in (None, "custom"):
        raise PydanticCustomError(
            "unsupported_tool",
            "server tool '{type}' is not supported: give custom tools "
            "(name, description, input_schema), which the client runs",
            {"type": value.get("type")},
        )
    return value


class ToolParam(RequestModel):
    name: str = Field(..., min_length=1, max_length=128)
    description: str | None = None
    input_schema: dict[str, Any] = Field(
        description="A JSON Schema of the tool's input; its `type` must be `object`."
    )
    type: Literal["custom"] | None = None
    strict: bool | None = Field(None, description="Accepted; forced calls always match.")
    cache_control: CacheControl | None = None

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise PydanticCustomError("schema_type", 'the schema\'s type must be "object"')
        return value


class ToolChoiceAuto(RequestModel):
    type: Literal["auto"]
    disable_parallel_tool_use: bool = Field(False, description="At most one call.")


class ToolChoiceAny(RequestModel):
    type: Literal["any"]
    disable_parallel_tool_use: bool = Field(False, description="Exactly one call.")


class ToolChoiceTool(RequestModel):
    type: Literal["tool"]
    name: str = Field(..., min_length=1)
    disable_parallel_tool_use: bool = Field(False, description="Exactly one call.")


class ToolChoiceNone(RequestModel):
    type: Literal["none"]


ToolChoice = Annotated[
    ToolChoiceAuto | ToolChoiceAny | ToolChoiceTool | ToolChoiceNone,
    Field(discriminator="type"),
]


# ---- thinking ------------------------------------------------------------------------------
class ThinkingEnabled(RequestModel):
    type: Literal["enabled"]
    budget_tokens: int = Field(
        ...,
        ge=1024,
        description="Checked as Anthropic does (≥ 1024, < max_tokens); not enforced apart "
        "from max_tokens, which thinking counts against.",
    )
    display: Literal["summarized", "omitted"] | None = Field(
        None, description="`omitted`: thinking blocks come back empty."
    )


class ThinkingAdaptive(RequestModel):
    type: Literal["adaptive"]
    display: Literal["summarized", "omitted"] | None = None


class ThinkingDisabled(RequestModel):
    type: Literal["disabled"]


ThinkingConfig = Annotated[
    ThinkingEnabled | ThinkingAdaptive | ThinkingDisabled, Field(discriminator="type")
]


class Metadata(RequestModel):
    user_id: str | None = Field(None, description="Accepted; not used.")


# ---- requests ------------------------------------------------------------------------------
class MessagesInput(RequestModel):
    """What both routes read: the conversation as the model gets it."""

    model: str = Field(..., min_length=1, description="The served model name.")
    messages: list[MessageParam] = Field(..., min_length=1)
    system: Annotated[list[TextBlockParam], BeforeValidator(_as_blocks)] | None = Field(
        None, description="A string, or text blocks (joined with newlines)."
    )
    tools: list[Annotated[ToolParam, BeforeValidator(_custom_tool)]] | None = Field(
        None, description="Custom tools; they go into the model's chat template."
    )
    tool_choice: ToolChoice | None = Field(
        None,
        description="`auto` (default with tools), `any`, `tool` (a name) or `none`; `any` and "
        "`tool` are enforced by constrained decoding.",
    )
    thinking: ThinkingConfig | None = Field(
        None,
        description="Sets the chat template's `enable_thinking`; what the model thinks comes "
        "back in `thinking` blocks.",
    )
    cache_control: CacheControl | None = None

    @field_validator("messages")
    @classmethod
    def _ends_with_a_user_turn(cls, value: list[MessageParam]) -> list[MessageParam]:
        if value and value[-1].role == "assistant":
            raise PydanticCustomError(
                "prefill",
                "the last message is an assistant turn; continuing it (prefill) is not "
                "supported: end with a user turn",
            )
        return value

    @property
    def tool_choice_name(self) -> str:
        """The core's choice: ``auto``, ``none``, ``required`` or the forced tool's name."""
        choice = self.tool_choice
        if choice is None:
            return "auto" if self.tools else "none"
        if isinstance(choice, ToolChoiceTool):
            return choice.name
        return {"auto": "auto", "any": "required", "none": "none"}[choice.type]

    @property
    def parallel_tool_calls(self) -> bool:
        choice = self.tool_choice
        return not (choice is not None and getattr(choice, "disable_parallel_tool_use", False))

    @property
    def template_args(self) -> dict[str, Any] | None:
        if self.thinking is None:
            return None
        return {"enable_thinking": self.thinking.type != "disabled"}

    @property
    def thinking_omitted(self) -> bool:
        return getattr(self.thinking, "display", None) == "omitted"


class MessagesRequest(MessagesInput):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": "onnx-genai",
                    "max_tokens": 32,
                    "messages": [{"role": "user", "content": "Hello!"}],
                }
            ]
        },
    )

    max_tokens: int = Field(..., gt=0, description="Tokens to generate at most (thinking too).")
    stop_sequences: list[str] | None = Field(
        None,
        max_length=MAX_STOP_SEQUENCES,
        description="The text ends before the first one generated, which is not returned; "
        "`stop_reason` is then `stop_sequence` and `stop_sequence` names it.",
    )
    temperature: float = Field(1.0, ge=0.0, le=1.0, description="0 means greedy decoding.")
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, description="0 disables the top-k cut.")
    seed: int | None = Field(
        None, ge=0, le=SEED_MAX, description="Extension: same seed, same output."
    )
    metadata: Metadata | None = None
    stream: bool = False

    @field_validator("stop_sequences")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        if value and any(not s for s in value):
            raise PydanticCustomError("empty_stop", "stop sequences must not be empty")
        return value

    @model_validator(mode="after")
    def _budget_under_max_tokens(self) -> MessagesRequest:
        # After the fields: ``thinking`` (inherited) is validated before ``max_tokens``.
        thinking = self.thinking
        if isinstance(thinking, ThinkingEnabled) and thinking.budget_tokens >= self.max_tokens:
            raise PydanticCustomError(
                "budget",
                "thinking.budget_tokens ({budget}) must be less than max_tokens ({limit})",
                {"budget": thinking.budget_tokens, "limit": self.max_tokens},
            )
        return self


class CountTokensRequest(MessagesInput):
    pass
