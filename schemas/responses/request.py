"""OpenAI's Responses API (POST /v1/responses): the request body.

Requests forbid unknown fields. Every field is honoured, accepted and ignored (metadata and
hints, for a reason), mapped onto what the model has (``reasoning.effort`` to the chat
template's thinking switch), or refused by name with a reason: docs/api/field-policy.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel, SamplingFields, only_with_stream
from schemas.openai.hints import Effort, with_effort
from schemas.responses.items import (
    FunctionTool,
    HostedTool,
    InputItem,
    NamespaceTool,
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
_REFUSED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "conversation": (
        "this server keeps no conversations; continue a response with previous_response_id",
        lambda v: v is None,
    ),
    "background": (
        "responses run while the request waits, never in the background",
        lambda v: not v,
    ),
    "prompt": ("this server keeps no prompt templates", lambda v: v is None),
    "include": (
        "logprobs are not available on /v1/responses",
        lambda v: "message.output_text.logprobs" not in (v or ()),
    ),
    "truncation": (
        "prompts are never truncated (one too long is a 400)",
        lambda v: v in (None, "disabled"),
    ),
    "top_logprobs": ("logprobs are not available on /v1/responses", lambda v: not v),
}
METADATA_KEYS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512

# What ``include`` may ask for. Only reasoning.encrypted_content can concern an item this server
# makes, and it never encrypts them: reasoning items come back without it. The others
# concern items it never makes (hosted tools' calls, input images).
Includable = Literal[
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
    "web_search_call.action.sources",
    "web_search_call.results",
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
]


class Reasoning(RequestModel):
    effort: Effort | None = Field(
        None,
        description="Mapped: `none`/`minimal` turn the chat template's `enable_thinking` off, "
        "the others on (models without the switch ignore it).",
    )
    summary: Literal["auto", "concise", "detailed"] | None = Field(
        None, description="Accepted and ignored: thinking comes back whole, never summarised."
    )
    generate_summary: Literal["auto", "concise", "detailed"] | None = Field(
        None, description="Deprecated name of `summary`; accepted and ignored."
    )


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
        None,
        description="Functions the model may call, and namespaces of functions; they go into "
        "its chat template. Hosted tools (web_search, file_search, code_interpreter, "
        "computer_use, image_generation, mcp) are left out.",
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
        description='Extension: variables for the chat template, e.g. {"enable_thinking": false}; '
        "they win over `reasoning.effort`.",
    )
    reasoning: Reasoning | None = Field(None, description="`effort` is mapped; `summary` ignored.")
    include: list[Includable] | None = Field(
        None,
        description="Accepted; reasoning items never carry `encrypted_content` (they are "
        "never encrypted), the other items named are never made here. "
        "`message.output_text.logprobs` is refused.",
    )
    client_metadata: dict[str, Any] | None = Field(
        None, description="Accepted and ignored (the client's own bookkeeping)."
    )
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = Field(
        None, description="Accepted and ignored: this server has one service tier."
    )
    store: bool | None = Field(
        None,
        description="Keep the response (default true), for `previous_response_id`, "
        "`GET /v1/responses/{id}` and its input items; false keeps nothing.",
    )
    previous_response_id: str | None = Field(
        None,
        min_length=1,
        description="Continue a stored response: its input and output items come before "
        "`input` (its `instructions` do not: only this request's apply).",
    )
    # Declared only to be refused with a reason (see _REFUSED).
    conversation: Any = Field(None, description="Not supported (use previous_response_id).")
    background: bool | None = Field(None, description="Not supported (only false).")
    prompt: Any = Field(None, description="Not supported.")
    truncation: str | None = Field(None, description='Only "disabled": never truncated.')
    top_logprobs: int | None = Field(None, description="Not supported (only 0).")

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

    @field_validator("tools")
    @classmethod
    def _unique_names(cls, value: list[Any] | None) -> list[Any] | None:
        seen: set[str] = set()
        for tool in value or ():
            for function in _functions(tool):
                if function.name in seen:
                    raise PydanticCustomError(
                        "duplicate_tool",
                        "two functions are named '{name}' (the model is shown each function "
                        "by its own name, namespaced or not)",
                        {"name": function.name},
                    )
                seen.add(function.name)
        return value

    @property
    def functions(self) -> list[FunctionTool]:
        """Every function offered to the model, namespaces flattened."""
        return [f for tool in self.tools or () for f in _functions(tool)]

    @property
    def namespaces(self) -> dict[str, str]:
        """A namespaced function's name → its namespace's name."""
        return {
            f.name: tool.name
            for tool in self.tools or ()
            if isinstance(tool, NamespaceTool)
            for f in tool.tools
        }

    @property
    def offered_tools(self) -> list[FunctionTool | NamespaceTool]:
        """The tools as the client gave them, less the hosted ones."""
        return [t for t in self.tools or () if not isinstance(t, HostedTool)]

    @property
    def hosted_tools(self) -> list[str]:
        return [t.type for t in self.tools or () if isinstance(t, HostedTool)]

    @property
    def template_args(self) -> dict[str, Any] | None:
        """The chat template's variables: ``reasoning.effort``'s switch, then the explicit
        ``chat_template_kwargs`` over it."""
        return with_effort(
            self.reasoning.effort if self.reasoning else None, self.chat_template_kwargs
        )

    @property
    def tool_choice_name(self) -> str:
        """``auto``, ``none``, ``required`` or the forced function's name."""
        choice = self.tool_choice
        if isinstance(choice, ToolChoiceFunction):
            return choice.name
        return choice or ("auto" if self.functions else "none")

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema the output must match, when ``text.format`` asks for JSON."""
        fmt = self.text.format if self.text is not None else None
        if isinstance(fmt, TextFormatJsonSchema):
            return fmt.schema_ or {"type": "object"}
        if isinstance(fmt, TextFormatJsonObject):
            return {"type": "object"}
        return None


def _functions(tool: Any) -> list[FunctionTool]:
    if isinstance(tool, FunctionTool):
        return [tool]
    return list(tool.tools) if isinstance(tool, NamespaceTool) else []
