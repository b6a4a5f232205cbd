"""OpenAI-compatible protocol: /v1/chat/completions, /v1/completions, /v1/models.

Requests forbid unknown fields. OpenAI fields this server cannot honour are declared anyway so
that sending them is a 400 naming the field and saying why, instead of a silent no-op.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from schemas.common import (
    ChatMessage,
    ContentPart,
    RequestModel,
    SamplingFields,
    content_value,
    only_with_stream,
)
from schemas.openai.hints import ChatHints, with_effort

MAX_N = 16


def _refuse(why: str) -> PydanticCustomError:
    return PydanticCustomError("unsupported", "not supported: {why}", {"why": why})


def _check_unsupported(
    rules: dict[str, tuple[str, Callable[[Any], bool]]], value: Any, info: ValidationInfo
) -> Any:
    """``rules[field] = (why, harmless)``: refuse a value unless ``harmless(value)``."""
    assert info.field_name is not None
    why, harmless = rules[info.field_name]
    if not harmless(value):
        raise _refuse(why)
    return value


# ---- shared request pieces ---------------------------------------------------------------
class StreamOptions(RequestModel):
    include_usage: bool = Field(
        False, description="Send a last chunk with `choices: []`, `usage` and `metrics`."
    )


class JsonSchemaSpec(RequestModel):
    model_config = ConfigDict(populate_by_name=True)

    name: str = Field(..., min_length=1, max_length=64)
    description: str | None = None
    schema_: dict[str, Any] = Field(
        default_factory=dict, alias="schema", description="A JSON Schema the output must match."
    )
    strict: bool | None = Field(None, description="Accepted; the schema is always enforced.")


class ResponseFormatText(RequestModel):
    type: Literal["text"]


class ResponseFormatJsonObject(RequestModel):
    type: Literal["json_object"]


class ResponseFormatJsonSchema(RequestModel):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[
    ResponseFormatText | ResponseFormatJsonObject | ResponseFormatJsonSchema,
    Field(discriminator="type"),
]


class OpenAIFields(SamplingFields):
    """The sampling surface plus what both OpenAI endpoints add to it."""

    n: int = Field(1, ge=1, le=MAX_N, description="Choices to generate (seed + i for choice i).")
    max_tokens: int | None = Field(
        None, gt=0, description="Tokens to generate at most; default GENAI_DEFAULT_MAX_TOKENS."
    )
    stream: bool = False
    stream_options: StreamOptions | None = Field(None, description="Only with `stream: true`.")
    user: str | None = Field(None, description="Accepted for compatibility; not used.")
    # Beam search (vLLM's names).
    use_beam_search: bool = Field(
        False, description="Extension: return the `n` best of `best_of` beams (deterministic)."
    )
    best_of: int | None = Field(
        None, ge=1, le=MAX_N, description="With use_beam_search: the beams searched (>= n)."
    )
    length_penalty: float = Field(
        1.0, description="With use_beam_search: beam score = log-prob / length ** this."
    )
    early_stopping: bool = Field(
        True, description="With use_beam_search: stop once `best_of` beams have finished."
    )

    _stream_options_need_stream = field_validator("stream_options")(only_with_stream)

    # Each beam option is checked where it is given (so the error names it); the sampling
    # fields come before use_beam_search and are checked once the model is complete.
    @field_validator("use_beam_search")
    @classmethod
    def _beams_do_not_stream(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("stream"):
            raise PydanticCustomError("beams_stream", "use_beam_search cannot stream")
        return value

    @field_validator("best_of")
    @classmethod
    def _best_of(cls, value: int | None, info: ValidationInfo) -> int | None:
        if not info.data.get("use_beam_search"):
            if value not in (None, 1):
                raise PydanticCustomError(
                    "needs_beams",
                    "best_of > 1 needs use_beam_search (sampled best_of is not implemented; "
                    "use n for several choices)",
                )
        elif value is not None and value < info.data.get("n", 1):
            raise PydanticCustomError("beams_n", "best_of must be at least n")
        return value

    @field_validator("length_penalty", "early_stopping")
    @classmethod
    def _needs_beams(cls, value: Any, info: ValidationInfo) -> Any:
        if not info.data.get("use_beam_search"):
            raise PydanticCustomError("needs_beams", "only with use_beam_search")
        return value

    @model_validator(mode="after")
    def _beam_search(self) -> OpenAIFields:
        if not self.use_beam_search:
            return self
        given = self.model_fields_set
        for name, neutral in (("temperature", 0.0), ("top_p", 1.0), ("top_k", 0)):
            if name in given and getattr(self, name) != neutral:
                raise PydanticCustomError(
                    "beams_sampling",
                    f"use_beam_search is deterministic: leave out {name} (or set {neutral})",
                )
        return self

    @property
    def beam_search(self) -> tuple[int, float, bool] | None:
        """(beams searched, length penalty, early stopping), or None without beam search."""
        if not self.use_beam_search:
            return None
        return (self.best_of or self.n, self.length_penalty, self.early_stopping)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


# ---- chat ----------------------------------------------------------------------------------
class FunctionDefinition(RequestModel):
    name: str = Field(..., min_length=1, max_length=128)
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="A JSON Schema of the arguments.")
    strict: bool | None = Field(None, description="Accepted; forced calls always match.")


class ToolDefinition(RequestModel):
    type: Literal["function"]
    function: FunctionDefinition


class FunctionName(RequestModel):
    name: str


class NamedToolChoice(RequestModel):
    type: Literal["function"]
    function: FunctionName


class CalledFunction(RequestModel):
    name: str
    arguments: str = Field(description="A JSON object, as a string.")


class MessageToolCall(RequestModel):
    id: str
    type: Literal["function"] = "function"
    function: CalledFunction


class OpenAIChatMessage(ChatMessage):
    """A chat message as OpenAI's API has it: an assistant's tool calls (its content may then
    be null) and a tool's result (``tool_call_id``) round-trip into the chat template."""

    content: str | list[ContentPart] | None = Field(  # type: ignore[assignment]
        None,
        description="A string, or text and image_url parts; null for an assistant that calls "
        "tools.",
    )
    tool_calls: list[MessageToolCall] | None = Field(None, description="An assistant's calls.")
    tool_call_id: str | None = Field(None, description="The call a `tool` message answers.")
    # What clients echo back when they append a response's message to the conversation (the
    # openai SDK's message object, LiteLLM's): accepted, and not shown to the model.
    refusal: str | None = Field(None, description="Echoed from a response; not shown.")
    reasoning_content: str | None = Field(
        None, description="Echoed from a response; earlier turns' thinking is not shown."
    )
    annotations: list[Any] | None = Field(None, description="Echoed from a response; ignored.")
    audio: None = Field(None, description="Echoed from a response as null (no audio here).")
    function_call: None = Field(None, description="Echoed as null; use tool_calls.")
    provider_specific_fields: dict[str, Any] | None = Field(
        None, description="LiteLLM's, echoed from its message objects; ignored."
    )

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        return None if value is None else content_value(value)

    @model_validator(mode="after")
    def _content_or_calls(self) -> OpenAIChatMessage:
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise PydanticCustomError(
                "content_required", "content may be null only for an assistant's tool calls"
            )
        return self

    def as_template_message(self) -> dict[str, Any]:
        message: dict[str, Any] = (
            super().as_template_message()
            if self.content is not None
            else {"role": self.role, "content": None}
        )
        if self.tool_calls:
            # Templates expect the arguments as an object (as Hugging Face passes them).
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.function.name,
                        "arguments": _json_or_text(call.function.arguments),
                    },
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return message


def _json_or_text(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


_LEGACY = "use tools and tool_choice (functions and function_call are deprecated)"
_CHAT_REFUSED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "functions": (_LEGACY, lambda v: not v),
    "function_call": (_LEGACY, lambda v: v in (None, "none")),
    "audio": ("this server produces text only", lambda v: v is None),
    "modalities": ("this server produces text only", lambda v: v in (None, ["text"])),
    "prediction": ("predicted outputs are not implemented", lambda v: v is None),
}


class ChatCompletionRequest(OpenAIFields, ChatHints):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": "onnx-genai",
                    "messages": [{"role": "user", "content": "Hello!"}],
                    "max_tokens": 32,
                }
            ]
        },
    )

    messages: list[OpenAIChatMessage] = Field(..., min_length=1)
    max_completion_tokens: int | None = Field(None, gt=0, description="Same as `max_tokens`.")
    logprobs: bool = Field(False, description="Return each output token's log-probability.")
    top_logprobs: int | None = Field(
        None, ge=0, le=20, description="With `logprobs`: this many likeliest alternatives."
    )
    response_format: ResponseFormat | None = Field(
        None, description="`json_object` and `json_schema` are enforced by constrained decoding."
    )
    tools: list[ToolDefinition] | None = Field(
        None, description="Functions the model may call; they go into its chat template."
    )
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        None,
        description="`auto` (default with tools), `none`, `required` or a named function; "
        "`required` and a name are enforced by constrained decoding.",
    )
    parallel_tool_calls: bool | None = Field(
        None, description="false: at most one call (enforced when the call is forced)."
    )
    chat_template_kwargs: dict[str, Any] | None = Field(
        None,
        description='Extension: variables for the chat template, e.g. {"enable_thinking": false}.',
    )
    # Declared only to be refused with a reason (see _CHAT_REFUSED).
    functions: list[Any] | None = Field(None, description="Not supported.")
    function_call: Any = Field(None, description="Not supported.")
    audio: Any = Field(None, description="Not supported.")
    modalities: list[str] | None = Field(None, description='Only `["text"]`.')
    prediction: Any = Field(None, description="Not supported.")

    @field_validator(*_CHAT_REFUSED)
    @classmethod
    def _refuse_unsupported(cls, value: Any, info: ValidationInfo) -> Any:
        return _check_unsupported(_CHAT_REFUSED, value, info)

    @field_validator("top_logprobs")
    @classmethod
    def _top_needs_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value and not info.data.get("logprobs"):
            raise PydanticCustomError("needs_logprobs", "requires logprobs: true")
        return value

    @field_validator("max_completion_tokens")
    @classmethod
    def _one_limit(cls, value: int | None, info: ValidationInfo) -> int | None:
        other = info.data.get("max_tokens")
        if value is not None and other is not None and value != other:
            raise PydanticCustomError("conflict", "disagrees with max_tokens; give one of them")
        return value

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def tool_choice_name(self) -> str:
        """``auto``, ``none``, ``required`` or the forced function's name."""
        choice = self.tool_choice
        if isinstance(choice, NamedToolChoice):
            return choice.function.name
        return choice or ("auto" if self.tools else "none")

    @property
    def template_args(self) -> dict[str, Any] | None:
        """``chat_template_kwargs`` over ``reasoning_effort``'s thinking switch."""
        return with_effort(self.reasoning_effort, self.chat_template_kwargs)

    @property
    def token_limit_name(self) -> str:
        return "max_completion_tokens" if self.max_completion_tokens else "max_tokens"

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema the output must match, when ``response_format`` asks for JSON."""
        fmt = self.response_format
        if isinstance(fmt, ResponseFormatJsonSchema):
            return fmt.json_schema.schema_ or {"type": "object"}
        if isinstance(fmt, ResponseFormatJsonObject):
            return {"type": "object"}
        return None


# ---- completions ---------------------------------------------------------------------------
_COMPLETION_REFUSED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "echo": ("the prompt is not echoed back", lambda v: not v),
    "suffix": ("insertion (fill-in-the-middle) is not implemented", lambda v: v is None),
}


# A prompt of token ids (OpenAI's and vLLM's form): strict ints, so true and "1" are no ids.
TokenIds = list[Annotated[StrictInt, Field(ge=0)]]


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_ids(value: Any) -> bool:
    """Whether a ``prompt`` value is one prompt of token ids (not a list of prompts)."""
    return isinstance(value, list) and bool(value) and isinstance(value[0], int)


class CompletionRequest(OpenAIFields):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"model": "onnx-genai", "prompt": "Once upon a time", "max_tokens": 32}]
        },
    )

    prompt: str | list[str] | TokenIds | list[TokenIds] = Field(
        ...,
        description="A string, a list of strings, a list of token ids, or a list of such lists "
        "(each prompt gets `n` choices). Token ids are fed as they are (what "
        "`/v1/completions/render` returns); each must be in the model's vocabulary.",
    )
    logprobs: int | None = Field(
        None, ge=0, le=5, description="Return log-probabilities with this many alternatives."
    )
    echo: bool = Field(False, description="Not supported (only false).")
    suffix: str | None = Field(None, description="Not supported.")

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_shape(cls, value: Any) -> Any:
        """One message for every wrong shape (the union's own names its first branch only)."""
        items = value if isinstance(value, list) else [value]
        flat = [x for item in items for x in (item if isinstance(item, list) else [item])]
        if not all(_is_id(x) for x in flat) and not all(isinstance(x, str) for x in items):
            raise PydanticCustomError(
                "prompt_shape",
                "a prompt is a string, a list of strings, a list of token ids (integers from "
                "0) or a list of such lists",
            )
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: Any) -> Any:
        prompts = [value] if isinstance(value, str) or _is_ids(value) else value
        if not prompts or not all(prompts):
            raise PydanticCustomError("empty_prompt", "give at least one non-empty prompt")
        return value

    @field_validator(*_COMPLETION_REFUSED)
    @classmethod
    def _refuse_unsupported(cls, value: Any, info: ValidationInfo) -> Any:
        return _check_unsupported(_COMPLETION_REFUSED, value, info)

    @property
    def prompts(self) -> list[str | list[int]]:
        """Each prompt: its text, or its token ids."""
        prompt: Any = self.prompt  # the validator's union: narrowed by shape, not by type
        return [prompt] if isinstance(prompt, str) or _is_ids(prompt) else list(prompt)
