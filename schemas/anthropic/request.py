"""Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens.

Requests forbid unknown fields, as on every route. Content this server cannot read (images,
documents) is refused with a 400 that names the block, never dropped; server tools are left
out of the prompt. Hints that have no effect here are accepted (``cache_control``: prefix reuse
is automatic; ``metadata``, ``service_tier``, thinking-clearing ``context_management``), and
``output_config.effort`` is mapped: docs/api/field-policy.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from schemas.anthropic.blocks import CacheControl, MessageParam, TextBlockParam, as_blocks
from schemas.common import (
    GREEDY_OR_MODEL,
    MIN_P_DOC,
    SEED_MAX,
    SPECULATIVE_DOC,
    RequestModel,
    SpeculativeOptions,
    shown,
)

MAX_STOP_SEQUENCES = 16

# ---- tools ---------------------------------------------------------------------------------
# Tools Anthropic runs on its side (versioned types, e.g. web_search_20250305). This server
# cannot run them: they are left out of the prompt (and logged), so that clients which send
# some still work.
SERVER_TOOL_PREFIXES = ("web_search_", "web_fetch_", "code_execution_", "tool_search_tool_")


def is_server_tool(kind: Any) -> bool:
    return isinstance(kind, str) and (
        kind.startswith(SERVER_TOOL_PREFIXES) or kind == "mcp_toolset"
    )


def _custom_tool(value: Any) -> Any:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in (None, "custom") and not is_server_tool(kind):
        raise PydanticCustomError(
            "unsupported_tool",
            "tool type '{type}' is not supported: give custom tools "
            "(name, description, input_schema), which the client runs",
            {"type": shown(kind)},
        )
    return value


def _tool_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "server" if is_server_tool(kind) else "custom"


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


class ServerToolParam(RequestModel):
    """A server tool (see :data:`SERVER_TOOL_PREFIXES`): accepted, never offered to the model."""

    model_config = ConfigDict(extra="allow")

    type: str
    name: str | None = None


AnyTool = Annotated[
    Annotated[ToolParam, Tag("custom")] | Annotated[ServerToolParam, Tag("server")],
    Discriminator(_tool_tag),
    BeforeValidator(_custom_tool),
]


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


class ContextEdit(RequestModel):
    """One context edit. Only the thinking-clearing kind is accepted: chat templates already
    leave earlier turns' thinking out, so it changes nothing here. Clearing tool results
    would change the prompt and is not done, so it is refused."""

    model_config = ConfigDict(extra="allow")

    type: str

    @field_validator("type")
    @classmethod
    def _clears_thinking(cls, value: str) -> str:
        if not value.startswith("clear_thinking_"):
            raise PydanticCustomError(
                "unsupported_edit",
                "context edit '{type}' is not supported: only clear_thinking edits are "
                "accepted (earlier thinking is never shown to the model)",
                {"type": shown(value)},
            )
        return value


class ContextManagement(RequestModel):
    edits: list[ContextEdit] = Field(default_factory=list)


class OutputConfig(RequestModel):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = Field(
        None,
        description="Mapped: without `thinking`, any effort turns the chat template's "
        "`enable_thinking` on (models without the switch ignore it).",
    )


# ---- requests ------------------------------------------------------------------------------
class MessagesInput(RequestModel):
    """What both routes read: the conversation as the model gets it."""

    model: str = Field(..., min_length=1, description="The served model name.")
    messages: list[MessageParam] = Field(..., min_length=1)
    system: Annotated[list[TextBlockParam], BeforeValidator(as_blocks)] | None = Field(
        None, description="A string, or text blocks (joined with newlines)."
    )
    tools: list[AnyTool] | None = Field(
        None,
        description="Custom tools; they go into the model's chat template. Server tools "
        "(web_search, web_fetch, code_execution, tool_search, mcp_toolset) are left out.",
    )
    mcp_servers: list[dict[str, Any]] | None = Field(
        None,
        description="MCP connectors: accepted and left out (this server calls no MCP server).",
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
    context_management: ContextManagement | None = Field(
        None,
        description="`clear_thinking_*` edits accepted: earlier turns' thinking is never shown "
        "to the model anyway. Other edits are refused.",
    )
    output_config: OutputConfig | None = Field(
        None, description="`effort` is mapped onto the chat template's thinking switch."
    )

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
    def custom_tools(self) -> list[ToolParam]:
        """The tools offered to the model: the custom ones."""
        return [t for t in self.tools or () if isinstance(t, ToolParam)]

    @property
    def server_tools(self) -> list[str]:
        """What is left out: the server tools' types, and the MCP servers' names."""
        left = [t.type for t in self.tools or () if isinstance(t, ServerToolParam)]
        return left + [f"mcp:{s.get('name', '?')}" for s in self.mcp_servers or ()]

    @property
    def tool_choice_name(self) -> str:
        """The core's choice: ``auto``, ``none``, ``required`` or the forced tool's name."""
        choice = self.tool_choice
        if choice is None:
            return "auto" if self.custom_tools else "none"
        if isinstance(choice, ToolChoiceTool):
            return choice.name
        return {"auto": "auto", "any": "required", "none": "none"}[choice.type]

    @property
    def parallel_tool_calls(self) -> bool:
        choice = self.tool_choice
        return not (choice is not None and getattr(choice, "disable_parallel_tool_use", False))

    @property
    def template_args(self) -> dict[str, Any] | None:
        """``thinking`` sets the template's ``enable_thinking``; without it,
        ``output_config.effort`` does (every effort thinks)."""
        if self.thinking is not None:
            return {"enable_thinking": self.thinking.type != "disabled"}
        if self.output_config is not None and self.output_config.effort is not None:
            return {"enable_thinking": True}
        return None

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

    max_tokens: int = Field(
        ...,
        gt=0,
        description="Tokens to generate at most (thinking too). More than the room left in the "
        "context is reduced to that room; reaching it ends with `stop_reason` "
        "`model_context_window_exceeded`.",
    )
    stop_sequences: list[str] | None = Field(
        None,
        max_length=MAX_STOP_SEQUENCES,
        description="The text ends before the first one generated, which is not returned; "
        "`stop_reason` is then `stop_sequence` and `stop_sequence` names it.",
    )
    temperature: float = Field(1.0, ge=0.0, le=1.0, description=GREEDY_OR_MODEL)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0, description="0 disables the top-k cut.")
    seed: int | None = Field(
        None, ge=0, le=SEED_MAX, description="Extension: same seed, same output."
    )
    min_p: float | None = Field(None, ge=0.0, le=1.0, description=f"Extension: {MIN_P_DOC}")
    speculative: SpeculativeOptions | None = Field(None, description=SPECULATIVE_DOC)
    metadata: Metadata | None = None
    stream: bool = False
    service_tier: Literal["auto", "standard_only"] | None = Field(
        None, description="Accepted and ignored: this server has one service tier."
    )
    container: None = Field(
        None, description="Only null: this server runs no code containers (a 400 otherwise)."
    )

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
