"""The one request every front door builds: what to generate, for whom, until when.

A door (an HTTP route, the in-process client) turns its own protocol into a
:class:`GenerationRequest`, hands it to ``InferenceService.submit`` and turns the handle's
deltas back into its wire format. Nothing here knows HTTP.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.models.sampling import DEFAULTED_FIELDS
from backends.types import (
    ChatPrompt,
    GuidanceKind,
    Prompt,
    SamplingParams,
    TextPrompt,
    TokenPrompt,
)

__all__ = [
    "ChatPrompt",
    "GenerationRequest",
    "Prompt",
    "TextPrompt",
    "TokenPrompt",
    "json_schema_guidance",
]


@dataclass(frozen=True)
class GenerationRequest:
    """Everything one generation needs.

    ``prompt`` may be a list (OpenAI completions): every prompt gets ``n`` choices, and choice
    ``p × n + i`` is prompt ``p``'s ``i``-th. A seeded request gives choice ``i`` the seed
    ``seed + i``: reproducible, yet the choices differ.

    ``deadline`` is a ``time.perf_counter()`` value; ``None`` means the server's own request
    timeout, counted from ``accepted_at``. Errors name these fields by these names (as
    :class:`backends.errors.Field`); each door tells them in its own protocol's names.

    ``unset`` names the ``sampling`` fields the client left out (temperature, top_p, top_k,
    repetition_penalty): ``sampling`` holds the door's own defaults for them, which the core
    replaces with the model's (GENAI_SAMPLING_DEFAULTS=model).
    """

    prompt: Prompt | Sequence[Prompt]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    unset: frozenset[str] = frozenset()
    max_tokens: int | None = None  # None: the room left, at most the server default
    # A max_tokens beyond the room left is reduced to it (Anthropic's Messages) instead of
    # refused (OpenAI's doors).
    fit_max_tokens: bool = False
    stop: Sequence[str] = ()
    n: int = 1
    model: str | None = None  # None: the served model
    request_id: str | None = None
    deadline: float | None = None
    accepted_at: float = field(default_factory=time.perf_counter)
    # Tool calls (a chat with tools): "auto", "none" (the tools are not offered), "required"
    # (at least one call, by constrained decoding) or a tool's name (exactly that call).
    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    split_reasoning: bool = False  # report the model's thinking apart (the door has a field)
    # The field the guidance came from: ``tools`` where it forces a tool call.
    guidance_field: str = "guidance"

    def __post_init__(self) -> None:
        if not self.unset <= DEFAULTED_FIELDS:
            unknown = ", ".join(sorted(self.unset - DEFAULTED_FIELDS))
            raise ValueError(f"no model default for the sampling fields {unknown}")

    @property
    def prompts(self) -> list[Prompt]:
        if isinstance(self.prompt, ChatPrompt | TextPrompt | TokenPrompt):
            return [self.prompt]
        return list(self.prompt)

    @property
    def chat(self) -> ChatPrompt | None:
        """The chat, when the request is one (tools and reasoning apply to chats only)."""
        prompts = self.prompts
        return prompts[0] if len(prompts) == 1 and isinstance(prompts[0], ChatPrompt) else None

    @property
    def choice_count(self) -> int:
        return len(self.prompts) * self.n

    @property
    def calls_held(self) -> bool:
        """Whether a grammar holds the tool calls the model writes (once the tools are
        applied): a forced call's, or ``auto``'s lazy one from the call's marker on (beam
        search runs no lazy grammar). A call the output ends inside then failed; it is not
        text."""
        if self.guidance_field == "tools":
            return True
        return self.sampling.call_grammar is not None and self.sampling.num_beams == 1


def json_schema_guidance(schema: Mapping[str, Any] | None) -> tuple[GuidanceKind, str]:
    """Guidance that makes the output a JSON value matching ``schema`` (any object if None).

    Free whitespace lets a weak model loop on spaces forever, so the output is compact JSON
    unless the schema says otherwise (``x-guidance``)."""
    spec: dict[str, Any] = dict(schema or {}) or {"type": "object"}
    spec.setdefault("x-guidance", {"whitespace_flexible": False})
    return ("json_schema", json.dumps(spec))
