"""Internal data exchanged with the generation loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True)
class GenerationParams:
    """What to generate. ``temperature == 0`` means greedy decoding."""

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class TokenEvent:
    """One generated token; ``text`` is the decoded piece it completes (may be empty)."""

    token_id: int
    text: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True)
class FinishEvent:
    reason: FinishReason
    usage: Usage
    error: str | None = None


@dataclass
class PreparedPrompt:
    """A rendered, tokenized prompt ready for the scheduler."""

    text: str
    token_ids: list[int] = field(repr=False)

    def __len__(self) -> int:
        return len(self.token_ids)
