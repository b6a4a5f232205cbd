"""Request bodies of the encoder doors."""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import Discriminator, Field, Tag, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from schemas.common import RequestModel


class _Truncation(RequestModel):
    truncate: bool | None = Field(
        None,
        description="Cut an input longer than the model's maximum to fit (Ollama's name). "
        "Unset or false: such an input is a 400 naming its index.",
    )
    truncate_prompt_tokens: int | None = Field(
        None,
        ge=-1,
        description="Cut each input to this many tokens; -1: the model's maximum (vLLM's name).",
    )

    def truncation(self) -> int | None:
        """The core's ``truncate``: None (refuse over-long inputs), -1 or a token count."""
        if self.truncate_prompt_tokens is not None:
            return self.truncate_prompt_tokens
        return -1 if self.truncate else None


class EmbeddingRequest(_Truncation):
    model: str | None = Field(None, description="An embedding model; unset: the first one.")
    input: str | list[str] | list[int] | list[list[int]] = Field(
        ..., description="A text, texts, a list of token ids, or lists of token ids."
    )
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="base64: the little-endian float32 bytes of each vector."
    )
    dimensions: int | None = Field(
        None, gt=0, description="Keep the first N values (Matryoshka), then re-normalise."
    )
    user: str | None = None
    prompt_name: str | None = Field(
        None, description="A named prompt of the model (config_sentence_transformers.json)."
    )
    input_type: str | None = Field(
        None,
        description="query / document (or search_query / search_document): the model's prompt "
        "of that name, if it has one.",
    )

    @field_validator("input", mode="before")
    @classmethod
    def _input_shape(cls, value: Any) -> Any:
        """One clear error for a wrong shape (not one per member of the union); token ids
        are integers, never booleans."""
        if isinstance(value, str):
            return value
        ids = isinstance(value, list) and all(_token_ids(v) for v in value)
        if isinstance(value, list) and (ids or _token_ids(value) or _texts(value)):
            return value
        raise PydanticCustomError(
            "input_shape",
            "must be a text, a list of texts, a list of token ids (integers) or a list of "
            "lists of token ids",
        )

    def inputs(self) -> list[str] | list[list[int]]:
        value = self.input
        if isinstance(value, str):
            return [value]
        if value and all(isinstance(v, int) for v in value):
            return [cast(list[int], value)]
        return cast("list[str] | list[list[int]]", value)


def _token_ids(value: Any) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


class RerankDocumentIn(RequestModel):
    text: str


# A document is a text or {"text": ...}: errors come from the one the value is (not both).
Document = Annotated[
    Annotated[str, Tag("text")] | Annotated[RerankDocumentIn, Tag("object")],
    Discriminator(lambda v: "text" if isinstance(v, str) else "object"),
]


class RerankRequest(_Truncation):
    model: str | None = Field(None, description="A reranker; unset: the first one.")
    query: str
    documents: list[Document]
    top_n: int | None = Field(None, ge=1, description="Return the best N only.")
    return_documents: bool = Field(False, description="Echo each document's text.")

    def texts(self) -> list[str]:
        return [d if isinstance(d, str) else d.text for d in self.documents]


class ScoreRequest(_Truncation):
    model: str | None = None
    text_1: str | list[str] = Field(..., description="The query (or queries, paired by index).")
    text_2: str | list[str] = Field(..., description="The documents to score against text_1.")

    @field_validator("text_2")
    @classmethod
    def _paired(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        left = info.data.get("text_1")
        lefts = 1 if left is None or isinstance(left, str) else len(left)
        rights = 1 if isinstance(value, str) else len(value)
        if lefts != 1 and lefts != rights:
            raise PydanticCustomError(
                "unpaired",
                "text_1 has {left} texts and text_2 {right}: give one text_1, or as many as text_2",
                {"left": lefts, "right": rights},
            )
        return value

    def _sides(self) -> tuple[list[str], list[str]]:
        left = [self.text_1] if isinstance(self.text_1, str) else self.text_1
        right = [self.text_2] if isinstance(self.text_2, str) else self.text_2
        return left, right

    def pairs(self) -> list[tuple[str, str]]:
        """One text against many, or two lists paired by index (vLLM's rule)."""
        left, right = self._sides()
        if len(left) == 1:
            return [(left[0], r) for r in right]
        return list(zip(left, right, strict=True))
