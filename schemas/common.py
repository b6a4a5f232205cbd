"""Request and response pieces every API shares: chat messages, sampling fields, timing."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

# A request's n-gram speculation bounds: the server setting's (backends.config's, which
# schemas/ may not import; tests/config/test_settings.py ties them).
SPECULATIVE_TOKENS_MAX = 32
PROMPT_LOOKUP_LIMIT = 16


class RequestModel(BaseModel):
    """A request body: unknown fields are refused, values are taken as the types they are
    (no ``true`` for a number, no ``"5"`` for an integer, no ``0`` for a boolean), and every
    string in it, however deep, is Unicode text (no lone surrogate: a ``"\\ud800"`` escape
    without its pair cannot be encoded, stored or sent back)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _unicode_text(cls, data: Any) -> Any:
        """Before any field is validated (another error could quote the string, and pydantic
        cannot render a message that holds a lone surrogate); ``field`` in the error's
        context is where it sits."""
        found = _lone_surrogate(data)
        if found is not None:
            text, at, where, key = found
            raise PydanticCustomError(
                "not_unicode",
                "holds a lone surrogate ({char}) at character {at}{in_key}: it is not Unicode "
                "text (half of a pair, alone) and cannot be encoded",
                {
                    "field": ".".join(where),
                    "char": f"U+{ord(text[at]):04X}",
                    "at": at,
                    "in_key": " in a key" if key else "",
                },
            )
        return data


def shown(value: Any) -> str:
    """A client's value as an error message may quote it: a lone surrogate as its escape
    (pydantic renders the message as UTF-8, and one would fail the whole answer)."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _lone_surrogate(
    value: Any, where: tuple[str, ...] = ()
) -> tuple[str, int, tuple[str, ...], bool] | None:
    """(the string, the index, its place, whether it is a key) of the first lone surrogate in
    ``value`` (strings, mapping keys and values, lists, nested), or None."""
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return value, exc.start, where, False
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _lone_surrogate(key, where)
            if found is not None:
                return (*found[:3], True)
            found = _lone_surrogate(item, (*where, shown(key)))
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _lone_surrogate(item, (*where, str(i)))
            if found is not None:
                return found
    return None


SEED_MAX = 2**31 - 1  # the engine's random_seed is a 32-bit signed int (backends.types.SEED_MAX)
MAX_STOPS = 4
# Sampling left out is the model's own (GENAI_SAMPLING_DEFAULTS=model); a field's default is
# the API's, which applies under GENAI_SAMPLING_DEFAULTS=api.
GREEDY_OR_MODEL = (
    "0 means greedy decoding. Left out: the model's default (its genai_config.json search), or "
    "this default under GENAI_SAMPLING_DEFAULTS=api."
)


class TextPart(RequestModel):
    type: Literal["text"]
    text: str


class ImageUrl(RequestModel):
    url: str = Field(
        min_length=1,
        description="A `data:image/...;base64,` URL, or an http(s) URL the server may fetch "
        "(only hosts in GENAI_IMAGE_URL_HOSTS; none by default).",
    )
    detail: Literal["auto", "low", "high"] | None = Field(
        None, description="Accepted; the model's processor decides the resolution."
    )


class ImagePart(RequestModel):
    type: Literal["image_url"]
    image_url: ImageUrl


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]
PART_TYPES = ("text", "image_url")


def _content_part(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") not in PART_TYPES:
        raise PydanticCustomError(
            "unsupported_part",
            "content part type '{type}' is not supported: parts are text or image_url",
            {"type": shown(value.get("type"))},
        )
    if isinstance(value, dict) and isinstance(value.get("image_url"), str):
        value = {**value, "image_url": {"url": value["image_url"]}}  # the short form
    return value


def content_value(value: Any) -> Any:
    """A message's content: a string or a list of parts, checked with one clear error (not one
    per member of the union)."""
    if isinstance(value, list):
        return [_content_part(p) for p in value]
    if not isinstance(value, str):
        raise PydanticCustomError("content_type", "must be a string or a list of content parts")
    return value


def template_content(parts: list[TextPart | ImagePart]) -> str | list[dict[str, str]]:
    """Parts as a chat template reads them: text only, joined with newlines; with images, a
    list of ``{"type": "text", "text": ...}`` and ``{"type": "image"}`` in their order (as
    Hugging Face passes them, so each model's template writes its own placeholders)."""
    if all(isinstance(p, TextPart) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextPart))
    return [
        {"type": "text", "text": p.text} if isinstance(p, TextPart) else {"type": "image"}
        for p in parts
    ]


class ChatMessage(RequestModel):
    role: Literal["system", "developer", "user", "assistant", "tool"] = Field(
        description="`developer` is treated as `system`."
    )
    content: str | list[ContentPart] = Field(
        description="A string, or a list of text and image_url parts (text joined with newlines)."
    )

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        return content_value(value)

    def as_template_message(self) -> dict[str, Any]:
        content = self.content if isinstance(self.content, str) else template_content(self.content)
        role = "system" if self.role == "developer" else self.role
        return {"role": role, "content": content}


class SpeculativeOptions(RequestModel):
    """Extension: this request's n-gram (prompt-lookup) speculation, in the shape of vLLM's
    ``speculative_config``; what it leaves out is the server's (GENAI_SPECULATIVE_TOKENS,
    GENAI_PROMPT_LOOKUP_MIN/MAX). The answer is the one the model writes without it."""

    method: Literal["ngram"] = Field(
        "ngram", description="`ngram`: drafts from the request's own prompt and output."
    )
    num_speculative_tokens: int | None = Field(
        None,
        ge=0,
        le=SPECULATIVE_TOKENS_MAX,
        description="At most this many drafted tokens verified in one run; 0 turns it off.",
    )
    prompt_lookup_min: int | None = Field(
        None, ge=1, le=PROMPT_LOOKUP_LIMIT, description="The shortest n-gram looked up."
    )
    prompt_lookup_max: int | None = Field(
        None, ge=1, le=PROMPT_LOOKUP_LIMIT, description="The longest n-gram, tried first."
    )

    @model_validator(mode="after")
    def _bounds(self) -> SpeculativeOptions:
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        if lo is not None and hi is not None and lo > hi:
            raise PydanticCustomError(
                "lookup_bounds", "prompt_lookup_min must not be more than prompt_lookup_max"
            )
        return self


MIN_P_DOC = (
    "Tokens less likely than min_p times the likeliest token are cut (after temperature, before "
    "top_k and top_p); 0 turns it off."
)
SPECULATIVE_DOC = (
    "Extension: n-gram speculation for this request (vLLM's speculative_config shape): "
    '{"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": a, '
    '"prompt_lookup_max": b}; unset fields take the server\'s settings.'
)


class SamplingFields(RequestModel):
    """The sampling surface every generating route accepts."""

    model: str | None = Field(None, description="The served model name; omit for the default.")
    temperature: float = Field(1.0, ge=0.0, le=2.0, description=GREEDY_OR_MODEL)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, description="0 disables the top-k cut.")
    min_p: float = Field(0.0, ge=0.0, le=1.0, description=MIN_P_DOC)
    min_tokens: int = Field(0, ge=0, description="EOS is suppressed until this many tokens.")
    stop: str | list[str] | None = Field(
        None,
        description=f"Up to {MAX_STOPS} strings; the text ends before the first one, "
        "which is not returned.",
    )
    seed: int | None = Field(None, ge=0, le=SEED_MAX, description="Same seed, same output.")
    repetition_penalty: float = Field(
        1.0, gt=0.0, le=2.0, description="Multiplicative (HF/CTRL) penalty; 1 = off."
    )
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = Field(
        None, description='Token id (as a string) → bias in [-100, 100], e.g. {"50256": -100}.'
    )
    speculative: SpeculativeOptions | None = Field(None, description=SPECULATIVE_DOC)

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> list[str] | None:
        stops = [value] if isinstance(value, str) else value
        if stops is None:
            return None
        if len(stops) > MAX_STOPS:
            raise PydanticCustomError(
                "too_many_stops", "at most {n} stop strings", {"n": MAX_STOPS}
            )
        if any(not s for s in stops):
            raise PydanticCustomError("empty_stop", "stop strings must not be empty")
        return stops

    @field_validator("logit_bias")
    @classmethod
    def _bias(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for key, bias in (value or {}).items():
            token = key.strip()
            if not (token.isascii() and token.isdigit()):
                raise PydanticCustomError(
                    "bad_token_id",
                    "keys must be token ids (non-negative integers), got '{key}'",
                    {"key": shown(key)},
                )
            if not -100.0 <= bias <= 100.0:
                raise PydanticCustomError(
                    "bad_bias", "biases must be in [-100, 100], got {bias}", {"bias": bias}
                )
        return value

    def token_bias(self) -> dict[int, float] | None:
        return {int(k): v for k, v in self.logit_bias.items()} if self.logit_bias else None

    @property
    def stop_list(self) -> list[str]:
        # The validator turned a single string into a list.
        return list(self.stop or [])


class TimingMetrics(BaseModel):
    ttft: float = Field(description="Seconds from request accepted to first output token.")
    total_latency: float = Field(description="Seconds from request accepted to the end.")
    tokens_per_second: float = Field(description="Decode speed: 1 / tpot.")
    output_tokens_per_second: float = Field(description="output_tokens / total_latency.")
    input_tokens: int
    output_tokens: int
    tpot: float = Field(description="(t_last - t_first) / (output_tokens - 1), seconds.")
    model: str


class FailedToolCall(BaseModel):
    """A tool call the model opened under a tool-call grammar that did not come out whole:
    the output ended inside it (the token limit, a stop string). It is no call, and its text
    is not in the answer either."""

    name: str | None = Field(
        None, description="The tool it names; null (Ollama: left out) if it was not written."
    )
    reason: str = Field(description="Why it failed, in a few words.")


FAILED_CALLS_DESCRIPTION = (
    "Extension, only when the output ended inside a tool call a grammar held (tools with "
    "`auto` on a format with a call marker, or a forced call): that call, which is neither "
    "a tool call nor text of the answer."
)


def only_with_stream(value: Any, info: ValidationInfo) -> Any:
    """Validator of a field allowed only with ``stream: true`` (declared after ``stream``)."""
    if value is not None and not info.data.get("stream"):
        raise PydanticCustomError("needs_stream", "only allowed with stream: true")
    return value
