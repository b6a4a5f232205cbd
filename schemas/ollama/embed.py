"""Ollama's embedding bodies: POST /api/embed and the older POST /api/embeddings."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from schemas.common import RequestModel
from schemas.ollama.request import KeepAlive, check_duration


class EmbedOptions(RequestModel):
    """The ``options`` an embedding honours: ``num_ctx`` caps an input's tokens (a longer one
    is cut with ``truncate``, a 400 without); the ones that tune how Ollama loads a model are
    accepted as no-ops. Sampling options are a 400: an embedding samples nothing."""

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


class _EmbedFields(RequestModel):
    model: str = Field(..., min_length=1, description="A served embedding model (/api/tags).")
    options: EmbedOptions | None = None
    keep_alive: KeepAlive = Field(
        None, description="Accepted, no effect: models stay loaded until unloaded."
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
