"""Internal data exchanged with the generation loop."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled", "timeout", "error"]
GuidanceKind = Literal["json_schema", "regex", "lark_grammar"]


@dataclass(frozen=True)
class GenerationParams:
    """What to generate. ``temperature == 0`` means greedy decoding.

    ``repetition_penalty`` is the multiplicative (CTRL/HF) penalty the engine applies natively;
    ``presence_penalty``/``frequency_penalty`` are OpenAI's additive ones and ``logit_bias``
    OpenAI's per-token bias, applied to the logits by the scheduler.
    """

    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    seed: int | None = None
    min_new_tokens: int = 0  # EOS is suppressed until this many tokens were generated
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Mapping[int, float] | None = None
    logprobs: bool = False  # report the chosen token's log-probability
    top_logprobs: int = 0  # and this many most likely alternatives
    guidance: tuple[GuidanceKind, str] | None = None  # constrained decoding (llguidance)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def needs_logits(self) -> bool:
        """Whether the scheduler must read (and maybe rewrite) logits each step."""
        return bool(self.min_new_tokens or self.needs_logits_beyond_min_tokens)

    @property
    def needs_logits_beyond_min_tokens(self) -> bool:
        return bool(
            self.presence_penalty
            or self.frequency_penalty
            or self.logit_bias
            or self.logprobs
            or self.top_logprobs
        )


@dataclass(frozen=True)
class TokenEvent:
    """One generated token; ``text`` is the decoded piece it completes (may be empty)."""

    token_id: int
    text: str
    logprob: float | None = None
    top_logprobs: tuple[tuple[int, float], ...] = ()


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
    queue_time: float = 0.0  # seconds between submission and the start of prefill


@dataclass
class PreparedPrompt:
    """A rendered, tokenized prompt ready for the scheduler."""

    text: str
    token_ids: list[int] = field(repr=False)

    def __len__(self) -> int:
        return len(self.token_ids)
