"""OpenAI's Responses API (POST /v1/responses), stateless: the request, the response object and
its stream events.

Requests forbid unknown fields. Fields this server cannot honour (stored state, built-in tools,
reasoning settings, ...) are declared anyway, so that sending them is a 400 naming the field
and saying why, instead of a silent no-op; their harmless values (``store: false``, an empty
``include``) are accepted, so that clients which always send them work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel, SamplingFields, TimingMetrics, only_with_stream

ItemStatus = Literal["in_progress", "completed", "incomplete"]


def _refuse(why: str) -> PydanticCustomError:
    return PydanticCustomError("unsupported", "not supported: {why}", {"why": why})


def _type_of(value: Any) -> Any:
    if isinstance(value, dict):
        return value.get("type")
    return getattr(value, "type", None)


def _only_types(what: str, allowed: tuple[str, ...], why: str) -> Callable[[Any], Any]:
    """A check, before a tagged union, that names an unsupported ``type`` and says why."""

    def check(value: Any) -> Any:
        kind = _type_of(value)
        if isinstance(value, dict) and kind is not None and kind not in allowed:
            raise PydanticCustomError(
                "unsupported_type",
                "{what} type '{type}' is not supported: {why}",
                {"what": what, "type": str(kind), "why": why},
            )
        return value

    return check


def _string_as(part_type: str) -> Callable[[Any], Any]:
    """A plain string is short for one text part (checked as that, with one clear error)."""

    def wrap(value: Any) -> Any:
        if isinstance(value, str):
            return [{"type": part_type, "text": value}]
        if not isinstance(value, list):
            raise PydanticCustomError("content_type", "must be a string or a list of text parts")
        return value

    return wrap


def _string_as_user_message(value: Any) -> Any:
    """A plain ``input`` string is one user message."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise PydanticCustomError("input_type", "must be a string or a list of input items")
    return value


def _or_string(schema: dict[str, Any]) -> None:
    """OpenAPI: the field also takes a plain string (see :func:`_string_as`)."""
    array = {key: schema.pop(key) for key in ("type", "items", "minItems") if key in schema}
    schema["anyOf"] = [{"type": "string"}, array]


# ---- input -------------------------------------------------------------------------------
class InputText(RequestModel):
    type: Literal["input_text"]
    text: str


class OutputTextPart(RequestModel):
    """An earlier answer's text, as the response gave it (so ``output`` can be sent back)."""

    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]] | None = None
    logprobs: list[dict[str, Any]] | None = None


class RefusalPart(RequestModel):
    type: Literal["refusal"]
    refusal: str


_TEXT_ONLY = "this model takes text only"

MessagePart = Annotated[
    InputText | OutputTextPart | RefusalPart,
    Field(discriminator="type"),
    BeforeValidator(
        _only_types("content part", ("input_text", "output_text", "refusal"), _TEXT_ONLY)
    ),
]


class InputMessage(RequestModel):
    """A message: ``system``/``developer`` (the same here), ``user`` or an earlier ``assistant``
    answer; ``id``, ``status`` and ``phase`` are accepted so that output items go back as is."""

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: Annotated[list[MessagePart], BeforeValidator(_string_as("input_text"))] = Field(
        description="A string, or text parts (joined with newlines).",
        json_schema_extra=_or_string,
    )
    id: str | None = None
    status: ItemStatus | None = None
    phase: Literal["commentary", "final_answer"] | None = None

    @property
    def text(self) -> str:
        return "\n".join(p.refusal if isinstance(p, RefusalPart) else p.text for p in self.content)


class FunctionCallItem(RequestModel):
    """A call the model made earlier (an output item sent back)."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str = Field(description="A JSON object, as a string.")
    id: str | None = None
    status: ItemStatus | None = None


class FunctionCallOutputItem(RequestModel):
    """What a call returned, for the call ``call_id``."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1)
    output: Annotated[
        list[
            Annotated[
                InputText,
                BeforeValidator(_only_types("output part", ("input_text",), _TEXT_ONLY)),
            ]
        ],
        BeforeValidator(_string_as("input_text")),
    ] = Field(
        description="A string, or text parts (joined with newlines).", json_schema_extra=_or_string
    )
    id: str | None = None
    status: ItemStatus | None = None

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.output)


class SummaryText(RequestModel):
    type: Literal["summary_text"]
    text: str


class ReasoningText(RequestModel):
    type: Literal["reasoning_text"]
    text: str


class ReasoningItem(RequestModel):
    """The model's earlier thinking (an output item sent back): accepted, and not shown to the
    model again (chat templates drop earlier turns' thinking)."""

    type: Literal["reasoning"]
    id: str | None = None
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    status: ItemStatus | None = None


_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")
_ITEM_WHY = (
    "input items are messages, function_call, function_call_output and reasoning "
    "(this server is stateless: it keeps no items to refer to, and runs no built-in tools)"
)


def _item_tag(value: Any) -> Any:
    kind = _type_of(value)
    # A message may leave out its type (EasyInputMessage).
    return "message" if kind is None and isinstance(value, dict) and "role" in value else kind


InputItem = Annotated[
    Annotated[InputMessage, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(
        _item_tag,
        custom_error_type="bad_item",
        custom_error_message="an input item needs a type (or a role, for a message)",
    ),
    BeforeValidator(_only_types("input item", _ITEM_TYPES, _ITEM_WHY)),
]


# ---- tools -------------------------------------------------------------------------------
class FunctionTool(RequestModel):
    """A function the model may call, flat as the Responses API has it."""

    type: Literal["function"]
    name: str = Field(..., min_length=1, max_length=128)
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="A JSON Schema of the arguments.")
    strict: bool | None = Field(None, description="Accepted; forced calls always match.")


class ToolChoiceFunction(RequestModel):
    type: Literal["function"]
    name: str = Field(..., min_length=1)


def _tool_choice(value: Any) -> Any:
    if isinstance(value, str) and value not in ("auto", "none", "required"):
        raise PydanticCustomError(
            "bad_tool_choice", "must be 'auto', 'none', 'required' or a function"
        )
    return _only_types(
        "tool_choice", ("function",), "only function tools (this server runs no built-in tools)"
    )(value)


Tool = Annotated[
    FunctionTool,
    BeforeValidator(
        _only_types("tool", ("function",), "this server runs no built-in tools; give functions")
    ),
]
ToolChoice = Annotated[
    Literal["none", "auto", "required"] | ToolChoiceFunction, BeforeValidator(_tool_choice)
]


# ---- text format -------------------------------------------------------------------------
class TextFormatText(RequestModel):
    type: Literal["text"]


class TextFormatJsonObject(RequestModel):
    type: Literal["json_object"]


class TextFormatJsonSchema(RequestModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    type: Literal["json_schema"]
    name: str = Field(..., min_length=1, max_length=64)
    schema_: dict[str, Any] = Field(
        default_factory=dict, alias="schema", description="A JSON Schema the output must match."
    )
    description: str | None = None
    strict: bool | None = Field(None, description="Accepted; the schema is always enforced.")


TextFormat = Annotated[
    TextFormatText | TextFormatJsonObject | TextFormatJsonSchema, Field(discriminator="type")
]


class TextConfig(RequestModel):
    format: TextFormat = Field(
        default_factory=lambda: TextFormatText(type="text"),
        description="`json_object` and `json_schema` are enforced by constrained decoding.",
    )
    verbosity: Literal["low", "medium", "high"] | None = Field(
        None, description="Not supported (only null)."
    )

    @field_validator("verbosity")
    @classmethod
    def _no_verbosity(cls, value: str | None) -> str | None:
        if value is not None:
            raise _refuse("this model's verbosity cannot be set")
        return value


class StreamOptions(RequestModel):
    include_obfuscation: bool = Field(
        True, description="Accepted; events are never padded (this server is not a proxy)."
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


# ---- the response ------------------------------------------------------------------------
class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[dict[str, Any]] = Field(default_factory=list, description="Always empty.")
    logprobs: list[dict[str, Any]] = Field(default_factory=list, description="Always empty.")


class OutputMessage(BaseModel):
    type: Literal["message"] = "message"
    id: str
    role: Literal["assistant"] = "assistant"
    status: ItemStatus
    content: list[OutputText]


class ReasoningTextOut(BaseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningOut(BaseModel):
    """The model's thinking, split out of the answer (models that think: Qwen3, ...)."""

    type: Literal["reasoning"] = "reasoning"
    id: str
    summary: list[SummaryText] = Field(default_factory=list, description="Always empty.")
    content: list[ReasoningTextOut]
    status: ItemStatus


class FunctionCallOut(BaseModel):
    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str = Field(description="Answer it with a function_call_output of this call_id.")
    name: str
    arguments: str = Field(description="A JSON object, as a string.")
    status: ItemStatus


OutputItem = Annotated[OutputMessage | ReasoningOut | FunctionCallOut, Field(discriminator="type")]


class InputTokensDetails(BaseModel):
    cached_tokens: int = Field(0, description="Prompt tokens served from the KV cache.")
    cache_write_tokens: int = Field(0, description="Always 0: prefix reuse is automatic.")


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = Field(0, description="Tokens generated while the model thought.")


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens"]


ResponseStatus = Literal["in_progress", "completed", "incomplete"]


class ResponsesResponse(BaseModel):
    """The response object. A failure is never a ``failed`` response: it is an HTTP error, or
    in a stream an ``error`` event."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: ResponseStatus
    incomplete_details: IncompleteDetails | None = Field(
        None, description="`max_output_tokens` when the output was cut at the token limit."
    )
    error: None = Field(None, description="Always null (see above).")
    model: str
    output: list[OutputItem]
    instructions: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    parallel_tool_calls: bool
    temperature: float
    top_p: float
    tool_choice: Literal["none", "auto", "required"] | ToolChoiceFunction
    tools: list[FunctionTool]
    max_output_tokens: int | None = None
    previous_response_id: None = None
    store: Literal[False] = False
    background: Literal[False] = False
    text: TextConfig
    truncation: Literal["disabled"] = "disabled"
    user: str | None = None
    usage: ResponseUsage | None = Field(None, description="Set once the response has ended.")
    metrics: TimingMetrics | None = Field(
        None,
        description="Extension: the server's timing for the request, as in /v1/chat; set once "
        "the response has ended.",
    )


# ---- stream events -----------------------------------------------------------------------
class ResponseCreatedEvent(BaseModel):
    type: Literal["response.created"] = "response.created"
    sequence_number: int
    response: ResponsesResponse


class ResponseInProgressEvent(BaseModel):
    type: Literal["response.in_progress"] = "response.in_progress"
    sequence_number: int
    response: ResponsesResponse


class ResponseCompletedEvent(BaseModel):
    type: Literal["response.completed"] = "response.completed"
    sequence_number: int
    response: ResponsesResponse


class ResponseIncompleteEvent(BaseModel):
    """The stream's end when the output was cut at the token limit (OpenAI's event for it)."""

    type: Literal["response.incomplete"] = "response.incomplete"
    sequence_number: int
    response: ResponsesResponse


class OutputItemAddedEvent(BaseModel):
    type: Literal["response.output_item.added"] = "response.output_item.added"
    sequence_number: int
    output_index: int
    item: OutputItem


class OutputItemDoneEvent(BaseModel):
    type: Literal["response.output_item.done"] = "response.output_item.done"
    sequence_number: int
    output_index: int
    item: OutputItem


ContentPart = Annotated[OutputText | ReasoningTextOut, Field(discriminator="type")]


class ContentPartAddedEvent(BaseModel):
    type: Literal["response.content_part.added"] = "response.content_part.added"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


class ContentPartDoneEvent(BaseModel):
    type: Literal["response.content_part.done"] = "response.content_part.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    part: ContentPart


class OutputTextDeltaEvent(BaseModel):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class OutputTextDoneEvent(BaseModel):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class ReasoningTextDeltaEvent(BaseModel):
    type: Literal["response.reasoning_text.delta"] = "response.reasoning_text.delta"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningTextDoneEvent(BaseModel):
    type: Literal["response.reasoning_text.done"] = "response.reasoning_text.done"
    sequence_number: int
    item_id: str
    output_index: int
    content_index: int
    text: str


class FunctionCallArgumentsDeltaEvent(BaseModel):
    type: Literal["response.function_call_arguments.delta"] = (
        "response.function_call_arguments.delta"
    )
    sequence_number: int
    item_id: str
    output_index: int
    delta: str


class FunctionCallArgumentsDoneEvent(BaseModel):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    sequence_number: int
    item_id: str
    output_index: int
    name: str
    arguments: str


class ResponseErrorEvent(BaseModel):
    """A failure after the stream started (a timeout, an operator's cancel, a shutdown): the
    stream ends here, with no ``response.completed``."""

    type: Literal["error"] = "error"
    sequence_number: int
    code: str | None = None
    message: str
    param: str | None = None


ResponseStreamEvent = (
    ResponseCreatedEvent
    | ResponseInProgressEvent
    | ResponseCompletedEvent
    | ResponseIncompleteEvent
    | OutputItemAddedEvent
    | OutputItemDoneEvent
    | ContentPartAddedEvent
    | ContentPartDoneEvent
    | OutputTextDeltaEvent
    | OutputTextDoneEvent
    | ReasoningTextDeltaEvent
    | ReasoningTextDoneEvent
    | FunctionCallArgumentsDeltaEvent
    | FunctionCallArgumentsDoneEvent
    | ResponseErrorEvent
)

# What a /v1/responses stream sends, one JSON object per event (documented in OpenAPI).
RESPONSE_STREAM_EVENTS = (
    ResponseCreatedEvent,
    ResponseInProgressEvent,
    ResponseCompletedEvent,
    ResponseIncompleteEvent,
    OutputItemAddedEvent,
    OutputItemDoneEvent,
    ContentPartAddedEvent,
    ContentPartDoneEvent,
    OutputTextDeltaEvent,
    OutputTextDoneEvent,
    ReasoningTextDeltaEvent,
    ReasoningTextDoneEvent,
    FunctionCallArgumentsDeltaEvent,
    FunctionCallArgumentsDoneEvent,
    ResponseErrorEvent,
)
