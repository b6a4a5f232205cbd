"""Request and response pieces every API shares: chat messages, sampling fields, timing."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError


class RequestModel(BaseModel):
    """A request body: unknown fields are refused, values are taken as the types they are
    (no ``true`` for a number, no ``"5"`` for an integer, no ``0`` for a boolean), and every
    string in it, however deep, is Unicode text (no lone surrogate: a ``"\\ud800"`` escape
    without its pair cannot be encoded, stored or sent back)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*")
    @classmethod
    def _unicode_text(cls, value: Any) -> Any:
        problem = not_unicode(value)
        if problem is not None:
            raise PydanticCustomError("not_unicode", "{problem}", {"problem": problem})
        return value


def not_unicode(value: Any) -> str | None:
    """What is wrong with the first lone surrogate in ``value``'s strings (mapping keys
    included; nested request models are checked on their own), or None."""
    found = _lone_surrogate(value)
    if found is None:
        return None
    text, at, where = found
    return (
        f"holds a lone surrogate (U+{ord(text[at]):04X}) at character {at}"
        f"{' in ' + where if where else ''}: it is not Unicode text (half of a pair, alone) "
        "and cannot be encoded"
    )


def _lone_surrogate(value: Any, where: str = "") -> tuple[str, int, str] | None:
    """(the string, the index, its place) of the first lone surrogate in ``value``, or None."""
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return value, exc.start, where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            label = str(key).encode("utf-8", "backslashreplace").decode()
            found = _lone_surrogate(key, f"a key of {where}" if where else "a key")
            found = found or _lone_surrogate(item, f"{where}.{label}" if where else label)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _lone_surrogate(item, f"{where}.{i}" if where else str(i))
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
            {"type": value.get("type")},
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

    def image_urls(self) -> list[str]:
        """The URLs of this message's image parts, in order."""
        if not isinstance(self.content, list):
            return []
        return [p.image_url.url for p in self.content if isinstance(p, ImagePart)]


class SamplingFields(RequestModel):
    """The sampling surface every generating route accepts."""

    model: str | None = Field(None, description="The served model name; omit for the default.")
    temperature: float = Field(1.0, ge=0.0, le=2.0, description=GREEDY_OR_MODEL)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0, description="0 disables the top-k cut.")
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
                    {"key": key},
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


def only_with_stream(value: Any, info: ValidationInfo) -> Any:
    """Validator of a field allowed only with ``stream: true`` (declared after ``stream``)."""
    if value is not None and not info.data.get("stream"):
        raise PydanticCustomError("needs_stream", "only allowed with stream: true")
    return value
