"""OpenAI's Responses API: the input items (messages, calls, call outputs, reasoning), tools
and text formats a request carries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel, shown

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
                {"what": what, "type": shown(kind), "why": why},
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


class InputImage(RequestModel):
    """An image: a ``data:`` URL, or an http(s) URL the server may fetch (only hosts in
    GENAI_IMAGE_URL_HOSTS); uploaded files (``file_id``) are not kept here."""

    type: Literal["input_image"]
    image_url: str = Field(..., min_length=1)
    detail: Literal["auto", "low", "high"] | None = Field(
        None, description="Accepted; the model's processor decides the resolution."
    )


_PARTS = "parts are input_text, input_image, output_text or refusal"
_TEXT_ONLY = "a call's output is text"

MessagePart = Annotated[
    InputText | InputImage | OutputTextPart | RefusalPart,
    Field(discriminator="type"),
    BeforeValidator(
        _only_types("content part", ("input_text", "input_image", "output_text", "refusal"), _PARTS)
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
        return "\n".join(
            p.refusal if isinstance(p, RefusalPart) else p.text
            for p in self.content
            if not isinstance(p, InputImage)
        )

    @property
    def template_content(self) -> str | list[dict[str, str]]:
        """The text; with images, the parts as chat templates take them (in order)."""
        if not any(isinstance(p, InputImage) for p in self.content):
            return self.text
        return [
            {"type": "image"}
            if isinstance(p, InputImage)
            else {"type": "text", "text": p.refusal if isinstance(p, RefusalPart) else p.text}
            for p in self.content
        ]


class FunctionCallItem(RequestModel):
    """A call the model made earlier (an output item sent back)."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = Field(None, description="The namespace tool that holds `name`.")
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
    "(items are not referred to by id: continue a stored response with previous_response_id; "
    "built-in tools do not run here)"
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


class NamespaceTool(RequestModel):
    """Functions grouped under a name (Codex sends its sub-agent tools so). The model is shown
    each function under its own name; a call to one reports the namespace beside the name, as
    the client named them."""

    type: Literal["namespace"]
    name: str = Field(..., min_length=1, max_length=128)
    description: str | None = None
    tools: list[FunctionTool] = Field(..., min_length=1)


# Tools OpenAI runs on its side. This server cannot run them: they are left out of the prompt
# (and logged), so that agents which always send some still work.
HOSTED_TOOLS = frozenset(
    {
        "web_search",
        "web_search_2025_08_26",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "file_search",
        "code_interpreter",
        "computer",
        "computer_use_preview",
        "image_generation",
        "mcp",
    }
)


class HostedTool(RequestModel):
    """A hosted tool (see :data:`HOSTED_TOOLS`): accepted, never offered to the model."""

    model_config = ConfigDict(extra="allow")

    type: str


_TOOL_TYPES = ("function", "namespace", *sorted(HOSTED_TOOLS))


def _tool_tag(value: Any) -> Any:
    kind = _type_of(value)
    return "hosted" if kind in HOSTED_TOOLS else kind


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[NamespaceTool, Tag("namespace")]
    | Annotated[HostedTool, Tag("hosted")],
    Discriminator(_tool_tag),
    BeforeValidator(
        _only_types(
            "tool",
            _TOOL_TYPES,
            "give functions (or namespaces of functions); hosted tools are left out",
        )
    ),
]


class ToolChoiceFunction(RequestModel):
    type: Literal["function"]
    name: str = Field(..., min_length=1)


def _tool_choice(value: Any) -> Any:
    if isinstance(value, str) and value not in ("auto", "none", "required"):
        raise PydanticCustomError(
            "bad_tool_choice", "must be 'auto', 'none', 'required' or a function"
        )
    kind = _type_of(value)
    if isinstance(value, dict) and kind in HOSTED_TOOLS:
        raise PydanticCustomError(
            "hosted_tool_choice",
            "tool_choice forces the hosted tool '{type}', which this server cannot run",
            {"type": shown(kind)},
        )
    return _only_types("tool_choice", ("function",), "only function tools can be forced")(value)


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
        None, description="Accepted and ignored: the model has no verbosity setting."
    )


class StreamOptions(RequestModel):
    include_obfuscation: bool = Field(
        True, description="Accepted; events are never padded (this server is not a proxy)."
    )
