"""OpenAI's Responses API (POST /v1/responses), stateless: the request body.

Requests forbid unknown fields. Fields this server cannot honour (stored state, built-in tools,
reasoning settings, ...) are declared anyway, so that sending them is a 400 naming the field
and saying why, instead of a silent no-op; their harmless values (``store: false``, an empty
``include``) are accepted, so that clients which always send them work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from schemas.common import SamplingFields, only_with_stream
from schemas.responses.items import (
    InputItem,
    ReasoningItem,
    StreamOptions,
    TextConfig,
    TextFormatJsonObject,
    TextFormatJsonSchema,
    Tool,
    ToolChoice,
    ToolChoiceFunction,
    _or_string,
    _refuse,
    _string_as_user_message,
)

# ---- the request -------------------------------------------------------------------------
_STATELESS = "this server is stateless and keeps no responses"
_REFUSED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "store": (f"{_STATELESS}; send store: false or leave it out", lambda v: v is not True),
    "previous_response_id": (
        f"{_STATELESS}; send the whole conversation as input",
        lambda v: v is None,
    ),
    "conversation": (f"{_STATELESS}; send the whole conversation as input", lambda v: v is None),
    "background": (f"{_STATELESS}, so it cannot run one in the background", lambda v: not v),
    "prompt": ("this server keeps no prompt templates", lambda v: v is None),
    "include": ("this server has no extra output data to include", lambda v: not v),
    "reasoning": (
        "this model's reasoning effort and summaries cannot be set",
        lambda v: not v or not any(v.values()),
    ),
    "truncation": (
        "prompts are never truncated (one too long is a 400)",
        lambda v: v in (None, "disabled"),
    ),
    "top_logprobs": ("logprobs are not available on /v1/responses", lambda v: not v),
    "service_tier": ("this server has one service tier", lambda v: v in (None, "auto", "default")),
}
METADATA_KEYS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512


class ResponsesRequest(SamplingFields):
    """POST /v1/responses. The sampling extensions every route shares (``top_k``, ``stop``,
    ``seed``, penalties, ``logit_bias``, ``min_tokens``) work here too."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"model": "onnx-genai", "input": "Hello!", "max_output_tokens": 32}]
        },
    )

    input: Annotated[list[InputItem], BeforeValidator(_string_as_user_message)] = Field(
        ...,
        min_length=1,
        description="A string (one user message), or items: messages, function_call and "
        "function_call_output (a conversation with tools), reasoning (accepted, not shown).",
        json_schema_extra=_or_string,
    )
    instructions: str | None = Field(None, description="A system message put first.")
    max_output_tokens: int | None = Field(
        None, gt=0, description="Tokens to generate at most; default GENAI_DEFAULT_MAX_TOKENS."
    )
    stream: bool = False
    stream_options: StreamOptions | None = Field(None, description="Only with `stream: true`.")
    tools: list[Tool] | None = Field(
        None, description="Functions the model may call; they go into its chat template."
    )
    tool_choice: ToolChoice | None = Field(
        None,
        description='`auto` (default), `none`, `required` or `{"type": "function", '
        '"name": ...}`; `required` and a name are enforced by constrained decoding.',
    )
    parallel_tool_calls: bool | None = Field(
        None, description="false: at most one call (enforced when the call is forced)."
    )
    text: TextConfig | None = Field(None, description="`format`: text, json_object or json_schema.")
    metadata: dict[str, str] | None = Field(
        None, description=f"Up to {METADATA_KEYS} pairs, echoed back in the response."
    )
    user: str | None = Field(None, description="Accepted for compatibility; not used.")
    safety_identifier: str | None = Field(None, description="Accepted; not used.")
    prompt_cache_key: str | None = Field(
        None, description="Accepted; prompt prefixes are reused without it."
    )
    max_tool_calls: int | None = Field(
        None, ge=1, description="Accepted; it limits built-in tools, and there are none here."
    )
    chat_template_kwargs: dict[str, Any] | None = Field(
        None,
        description='Extension: variables for the chat template, e.g. {"enable_thinking": false}.',
    )
    # Declared only to be refused with a reason (see _REFUSED).
    store: bool | None = Field(None, description="Only false: this server keeps no responses.")
    previous_response_id: str | None = Field(None, description="Not supported (stateless).")
    conversation: Any = Field(None, description="Not supported (stateless).")
    background: bool | None = Field(None, description="Not supported (only false).")
    prompt: Any = Field(None, description="Not supported.")
    include: list[str] | None = Field(None, description="Not supported (only empty).")
    reasoning: dict[str, Any] | None = Field(None, description="Not supported (only null).")
    truncation: str | None = Field(None, description='Only "disabled": never truncated.')
    top_logprobs: int | None = Field(None, description="Not supported (only 0).")
    service_tier: str | None = Field(None, description='Only "auto" or "default".')

    @field_validator(*_REFUSED)
    @classmethod
    def _refuse_unsupported(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        why, harmless = _REFUSED[info.field_name]
        if not harmless(value):
            raise _refuse(why)
        return value

    @field_validator("input")
    @classmethod
    def _something_to_answer(cls, value: list[Any]) -> list[Any]:
        if all(isinstance(item, ReasoningItem) for item in value):
            raise PydanticCustomError(
                "nothing_to_answer", "give at least one message or function call item"
            )
        return value

    _stream_options_need_stream = field_validator("stream_options")(only_with_stream)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if len(value) > METADATA_KEYS:
            raise PydanticCustomError("too_many_keys", "at most {n} pairs", {"n": METADATA_KEYS})
        if any(
            len(k) > METADATA_KEY_CHARS or len(v) > METADATA_VALUE_CHARS for k, v in value.items()
        ):
            raise PydanticCustomError(
                "too_long",
                "keys are at most {k} characters and values at most {v}",
                {"k": METADATA_KEY_CHARS, "v": METADATA_VALUE_CHARS},
            )
        return value

    @property
    def tool_choice_name(self) -> str:
        """``auto``, ``none``, ``required`` or the forced function's name."""
        choice = self.tool_choice
        if isinstance(choice, ToolChoiceFunction):
            return choice.name
        return choice or ("auto" if self.tools else "none")

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema the output must match, when ``text.format`` asks for JSON."""
        fmt = self.text.format if self.text is not None else None
        if isinstance(fmt, TextFormatJsonSchema):
            return fmt.schema_ or {"type": "object"}
        if isinstance(fmt, TextFormatJsonObject):
            return {"type": "object"}
        return None
