"""Ollama's native API: the bodies of POST /api/chat, /api/generate and /api/show.

Requests forbid unknown fields, as on every route: an Ollama field or option this server
cannot honour is declared anyway, so that sending it is a 400 that names it and says why,
never a silent no-op. Options that only tune how Ollama loads or runs a model (threads, GPU
layers, batch size, memory mapping) have no counterpart here and are accepted as no-ops.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from schemas.common import (
    MIN_P_DOC,
    SEED_MAX,
    SPECULATIVE_DOC,
    RequestModel,
    SamplingFields,
    SpeculativeOptions,
)

MAX_STOPS = 16
ThinkLevel = Literal["low", "medium", "high", "max"]
# Ollama's own defaults (its api.DefaultOptions): what a client that sets nothing gets under
# GENAI_SAMPLING_DEFAULTS=api (otherwise the model folder's, as Ollama takes its Modelfile's).
DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_K = 40
DEFAULT_TOP_P = 0.9
# A Go duration ("5m", "1h30m", "-1s") or a whole number of seconds, as a string.
_DURATION = re.compile(r"^-?(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$|^-?\d+$")


KeepAlive = str | float | int | None


def check_duration(value: KeepAlive) -> KeepAlive:
    """``keep_alive`` as Ollama reads it: a Go duration or seconds."""
    if isinstance(value, str) and not _DURATION.match(value.strip()):
        raise PydanticCustomError(
            "duration", 'must be a duration such as "5m", "1h" or "-1", or seconds'
        )
    return value


_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


def keep_alive_seconds(value: KeepAlive) -> float | None:
    """``keep_alive`` in seconds, as Ollama reads it: a number is seconds, a string a Go
    duration or seconds; negative: kept loaded (-1). None: not given."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return -1.0 if value < 0 else float(value)
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("-")
    if body.isdigit():
        seconds = float(body)
    else:
        seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _PART.findall(body))
    return -1.0 if sign < 0 and seconds > 0 else seconds


def _refuse(why: str) -> PydanticCustomError:
    return PydanticCustomError("unsupported", "not supported: {why}", {"why": why})


# ---- options -------------------------------------------------------------------------------
# The harmless value of each option that is refused otherwise: (that value, why).
_ONLY_DEFAULT: dict[str, tuple[Any, str]] = {
    "typical_p": (1.0, "typical sampling; use top_p or top_k"),
    "tfs_z": (1.0, "tail-free sampling; use top_p or top_k"),
    "mirostat": (0, "mirostat sampling; use temperature, top_p or top_k"),
    "repeat_last_n": (-1, "a penalty window: repeat_penalty counts the whole sequence (-1)"),
    "penalize_newline": (False, "penalize_newline; repeat_penalty applies to every token"),
}


class OllamaOptions(RequestModel):
    """The ``options`` object (Ollama's Modelfile parameters). Unset sampling fields take the
    model folder's defaults (Ollama's own under GENAI_SAMPLING_DEFAULTS=api); ``null`` is
    unset."""

    # Sampling.
    temperature: float | None = Field(
        None,
        ge=0.0,
        le=2.0,
        description=f"Default: the model's ({DEFAULT_TEMPERATURE} under "
        "GENAI_SAMPLING_DEFAULTS=api); 0 is greedy.",
    )
    top_p: float | None = Field(
        None, gt=0.0, le=1.0, description=f"Default: the model's ({DEFAULT_TOP_P} under api)."
    )
    top_k: int | None = Field(
        None,
        ge=0,
        description=f"Default: the model's ({DEFAULT_TOP_K} under api); 0 disables the cut.",
    )
    seed: int | None = Field(None, ge=-1, le=SEED_MAX, description="-1: a random seed.")
    num_predict: int | None = Field(
        None,
        ge=-2,
        description="Tokens to generate at most; -1 and -2 (Ollama: until the context is "
        "full) mean the server's default output length, reduced to the room left.",
    )
    stop: list[str] | None = Field(None, max_length=MAX_STOPS)
    repeat_penalty: float | None = Field(
        None,
        gt=0.0,
        le=2.0,
        description="Multiplicative, over the whole sequence; 1 = off. Default: the model's "
        "(1 under api).",
    )
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0)
    min_p: float | None = Field(None, ge=0.0, le=1.0, description=MIN_P_DOC)
    num_ctx: int | None = Field(
        None,
        ge=1,
        description="At most the model's context length (a 400 beyond); the model's whole "
        "context is used either way.",
    )
    # Refused unless at the value that turns them off.
    typical_p: float | None = None
    tfs_z: float | None = None
    mirostat: int | None = None
    repeat_last_n: int | None = None
    penalize_newline: bool | None = None
    # Accepted, no effect: mirostat is off, and the rest tune how Ollama loads a model.
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    num_keep: int | None = None
    num_batch: int | None = None
    num_gpu: int | None = None
    main_gpu: int | None = None
    num_thread: int | None = None
    numa: bool | None = None
    low_vram: bool | None = None
    f16_kv: bool | None = None
    logits_all: bool | None = None
    vocab_only: bool | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None
    embedding_only: bool | None = None
    draft_num_predict: int | None = None
    # Extensions of this server (Ollama has neither).
    min_tokens: int | None = Field(
        None, ge=0, description="Extension: EOS is suppressed until this many tokens."
    )
    tool_choice: str | None = Field(
        None,
        min_length=1,
        description='Extension: "auto" (the default with tools), "none", "required" (at '
        "least one call) or a tool's name (that call); forced calls are made by constrained "
        "decoding.",
    )
    speculative: SpeculativeOptions | None = Field(None, description=SPECULATIVE_DOC)

    @field_validator(*_ONLY_DEFAULT)
    @classmethod
    def _only_off(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        off, why = _ONLY_DEFAULT[info.field_name]
        if value is not None and value != off:
            raise _refuse(f"{why} ({off!r}, which turns it off, is accepted)")
        return value

    @field_validator("num_predict")
    @classmethod
    def _not_zero(cls, value: int | None) -> int | None:
        if value == 0:
            raise PydanticCustomError("num_predict", "must be -1, -2 or at least 1")
        return value

    @field_validator("stop")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        if value and any(not s for s in value):
            raise PydanticCustomError("empty_stop", "stop strings must not be empty")
        return value

    @property
    def max_tokens(self) -> int | None:
        return self.num_predict if self.num_predict is not None and self.num_predict > 0 else None

    def sampling_fields(self) -> SamplingFields:
        """The sampling surface every door shares, with this door's own defaults where unset (the
        core puts the model's in their place unless GENAI_SAMPLING_DEFAULTS=api)."""
        return SamplingFields.model_construct(
            temperature=DEFAULT_TEMPERATURE if self.temperature is None else self.temperature,
            top_p=DEFAULT_TOP_P if self.top_p is None else self.top_p,
            top_k=DEFAULT_TOP_K if self.top_k is None else self.top_k,
            seed=None if self.seed is None or self.seed < 0 else self.seed,
            min_tokens=self.min_tokens or 0,
            repetition_penalty=1.0 if self.repeat_penalty is None else self.repeat_penalty,
            presence_penalty=self.presence_penalty or 0.0,
            frequency_penalty=self.frequency_penalty or 0.0,
            min_p=self.min_p or 0.0,
            speculative=self.speculative,
            logit_bias=None,
            stop=self.stop,
        )


# ---- the request fields both generating routes share -------------------------------------
IMAGES_DOC = (
    "Base64 images (a data: URL is taken too), for a model that reads images (/api/show lists "
    '"vision"); a text-only model answers a 400 naming the model and the modality.'
)


class GenerateFields(RequestModel):
    model: str = Field(..., min_length=1, description="A served model name (/api/tags).")
    format: Literal["", "json"] | dict[str, Any] | None = Field(
        None,
        description='"json" (any JSON object) or a JSON schema, enforced by constrained decoding.',
    )
    options: OllamaOptions | None = None
    stream: bool = Field(True, description="Newline-delimited JSON objects; false: one object.")
    keep_alive: KeepAlive = Field(
        None,
        description='How long the model stays loaded after this request: a duration ("5m"), '
        "or seconds; 0 unloads it once the request ends, a negative one keeps it loaded. "
        "Unset: the model's own setting (GENAI_KEEP_LOADED).",
    )
    think: bool | ThinkLevel | None = Field(
        None,
        description="Sets the chat template's `enable_thinking` (a level also sets "
        "`reasoning_effort`); the thinking comes back apart, in `thinking`. A 400 on a model "
        "that does not think.",
    )
    logprobs: bool = Field(False, description="Each token's log-probability.")
    top_logprobs: int = Field(0, ge=0, le=20, description="With logprobs: alternatives.")
    truncate: bool | None = None
    shift: bool | None = None

    @field_validator("keep_alive")
    @classmethod
    def _duration(cls, value: KeepAlive) -> KeepAlive:
        return check_duration(value)

    @field_validator("truncate", "shift")
    @classmethod
    def _no_cuts(cls, value: bool | None) -> bool | None:
        if value:
            raise _refuse("a prompt longer than the context is refused, never cut")
        return value

    @property
    def opts(self) -> OllamaOptions:
        return self.options or OllamaOptions()

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema the output must match, when ``format`` asks for JSON."""
        if self.format == "json":
            return {"type": "object"}
        return self.format or None

    @property
    def template_args(self) -> dict[str, Any] | None:
        if self.think is None:
            return None
        if isinstance(self.think, bool):
            return {"enable_thinking": self.think}
        return {"enable_thinking": True, "reasoning_effort": self.think}


# ---- /api/chat -----------------------------------------------------------------------------
class CalledFunction(RequestModel):
    name: str = Field(..., min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    index: int | None = None


class ToolCall(RequestModel):
    """A call an assistant turn made, sent back with the history."""

    function: CalledFunction
    id: str | None = None
    type: Literal["function"] | None = None


class Message(RequestModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    thinking: str | None = Field(
        None, description="Accepted; not shown to the model (templates drop old thinking)."
    )
    images: list[str] | None = Field(None, description=IMAGES_DOC)
    tool_calls: list[ToolCall] | None = None
    tool_name: str | None = Field(None, description="On a tool turn: the tool that ran.")
    tool_call_id: str | None = None

    @field_validator("role", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value  # as Ollama reads it

    def as_template_message(self) -> dict[str, Any]:
        """The turn as chat templates take it; with images, content parts: the images first,
        then the text (Ollama attaches a message's images to it, not to a place in its text)."""
        content: str | list[dict[str, str]] = self.content
        if self.images:
            text = [{"type": "text", "text": self.content}] if self.content else []
            content = [{"type": "image"} for _ in self.images] + text
        message: dict[str, Any] = {"role": self.role, "content": content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.tool_name is not None:
            message["name"] = self.tool_name
        return message


class FunctionDefinition(RequestModel):
    name: str = Field(..., min_length=1, max_length=128)
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="A JSON Schema of the arguments.")


class Tool(RequestModel):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class ChatRequest(GenerateFields):
    messages: list[Message] = Field(
        default_factory=list, description="Empty: nothing is generated (Ollama's load call)."
    )
    tools: list[Tool] | None = None

    @property
    def tool_choice(self) -> str:
        choice = self.opts.tool_choice
        if choice is not None:
            return choice
        return "auto" if self.tools else "none"


# ---- /api/generate -------------------------------------------------------------------------
class GenerateRequest(GenerateFields):
    prompt: str = Field("", description="Empty: nothing is generated (Ollama's load call).")
    system: str | None = Field(None, description="The system turn (not with `raw`).")
    raw: bool = Field(False, description="The prompt as it is, without the chat template.")
    images: list[str] | None = Field(None, description=IMAGES_DOC + " Not with `raw`.")
    suffix: str | None = Field(None, description="Refused: no served model does infill.")
    template: str | None = Field(None, description="Refused: the model's own template is used.")
    context: list[int] | None = Field(None, description="Refused: deprecated upstream.")

    @field_validator("suffix")
    @classmethod
    def _no_suffix(cls, value: str | None) -> str | None:
        if value:
            raise _refuse("no served model does fill-in-the-middle")
        return value

    @field_validator("template")
    @classmethod
    def _no_template(cls, value: str | None) -> str | None:
        if value:
            raise _refuse("Go templates; the model's own chat template is used")
        return value

    @field_validator("context")
    @classmethod
    def _no_context(cls, value: list[int] | None) -> list[int] | None:
        if value:
            raise _refuse("deprecated by Ollama; send the history to /api/chat")
        return value

    @model_validator(mode="after")
    def _no_system_when_raw(self) -> GenerateRequest:
        if self.raw and self.system:
            raise PydanticCustomError(
                "raw_system", "system cannot be combined with raw: the prompt is used as it is"
            )
        if self.raw and self.images:
            raise PydanticCustomError(
                "raw_images",
                "images cannot be combined with raw: the chat template places the images",
            )
        return self


# ---- /api/show -----------------------------------------------------------------------------
class ModelNamed(RequestModel):
    """A request that names its model by ``model`` or, as older clients do, ``name``."""

    model: str | None = Field(None, min_length=1)
    name: str | None = Field(None, min_length=1, description="The older name of `model`.")

    @model_validator(mode="after")
    def _named(self) -> ModelNamed:
        if not (self.model or self.name):
            raise PydanticCustomError("missing", "model is required")
        return self

    @property
    def model_name(self) -> str:
        return self.model or self.name or ""


class ShowRequest(ModelNamed):
    verbose: bool = Field(False, description="Accepted; the answer is the same.")
    system: str | None = None
    template: str | None = None
    options: dict[str, Any] | None = None
