"""Ollama's embedding bodies: POST /api/embed and the older POST /api/embeddings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel
from schemas.ollama.request import KeepAlive, check_duration

# Generation options: an embedding samples nothing, so one that is set is a 400 (clients such
# as LangChain's OllamaEmbeddings send them all, unset, as null: that is accepted).
_GENERATION = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "tfs_z",
    "mirostat",
    "mirostat_eta",
    "mirostat_tau",
    "repeat_last_n",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "penalize_newline",
    "stop",
    "seed",
    "num_predict",
)


class EmbedOptions(RequestModel):
    """The ``options`` an embedding honours: ``num_ctx`` is where ``truncate`` cuts; the ones
    that tune how Ollama loads a model are accepted as no-ops. Generation options are a 400
    when set (null is accepted): an embedding samples nothing."""

    num_ctx: int | None = Field(
        None, ge=1, description="At most this many tokens an input (and at most the model's)."
    )
    num_keep: int | None = None
    num_batch: int | None = None
    num_gpu: int | None = None
    main_gpu: int | None = None
    num_thread: int | None = None
    numa: bool | None = None
    low_vram: bool | None = None
    f16_kv: bool | None = None
    vocab_only: bool | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None
    embedding_only: bool | None = None
    temperature: Any = None
    top_k: Any = None
    top_p: Any = None
    min_p: Any = None
    typical_p: Any = None
    tfs_z: Any = None
    mirostat: Any = None
    mirostat_eta: Any = None
    mirostat_tau: Any = None
    repeat_last_n: Any = None
    repeat_penalty: Any = None
    presence_penalty: Any = None
    frequency_penalty: Any = None
    penalize_newline: Any = None
    stop: Any = None
    seed: Any = None
    num_predict: Any = None

    @field_validator(*_GENERATION)
    @classmethod
    def _unset(cls, value: Any) -> Any:
        if value is not None:
            raise PydanticCustomError(
                "unsupported", "not supported: an embedding samples nothing (null is accepted)"
            )
        return value


class _EmbedFields(RequestModel):
    model: str = Field(..., min_length=1, description="A served embedding model (/api/tags).")
    options: EmbedOptions | None = None
    keep_alive: KeepAlive = Field(
        None,
        description="How long the model stays loaded after this request (as on /api/chat).",
    )

    @field_validator("keep_alive")
    @classmethod
    def _duration(cls, value: KeepAlive) -> KeepAlive:
        return check_duration(value)

    @property
    def num_ctx(self) -> int | None:
        return self.options.num_ctx if self.options else None


class EmbedRequest(_EmbedFields):
    input: str | list[str] = Field(
        "", description='A text or texts; "" or []: nothing is embedded (Ollama\'s load call).'
    )
    truncate: bool = Field(
        True,
        description="Cut an input longer than the context (num_ctx, or the model's) to fit; "
        "false: such an input is a 400 naming its index.",
    )
    dimensions: int | None = Field(
        None, gt=0, description="Keep the first N values (Matryoshka), then re-normalise."
    )

    def inputs(self) -> list[str]:
        if isinstance(self.input, str):
            return [self.input] if self.input else []
        return self.input


class EmbeddingsRequest(_EmbedFields):
    """The older route: one prompt, never cut (an over-long prompt is a 400)."""

    prompt: str = Field("", description='"": nothing is embedded (an empty embedding).')


class EmbedResponse(BaseModel):
    model: str
    embeddings: list[list[float]] = Field(description="One vector per input, L2-normalised.")
    total_duration: int = Field(0, description="Nanoseconds, the whole request.")
    load_duration: int = Field(0, description="Nanoseconds: 0, the model is loaded.")
    prompt_eval_count: int = Field(0, description="The inputs' tokens.")


class EmbeddingsResponse(BaseModel):
    embedding: list[float] = Field(description="The model's vector for the prompt.")
