"""HTTP bodies → the core's request pieces, and what the core reports (usage, timing, how a
choice ended) → the numbers and reasons every door reports, each in its own shape.

Shared by every HTTP door, so a sampling field or a usage total means the same on each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from backends.chat.parsers import FailedCall
from backends.core.request import ChatPrompt, json_schema_guidance
from backends.core.timing import RequestMetrics
from backends.models.sampling import DEFAULTED_FIELDS
from backends.types import ChoiceFinish, ImageSource, SamplingParams, Speculative, Usage
from schemas.common import (
    ChatMessage,
    FailedToolCall,
    ImagePart,
    SamplingFields,
    SpeculativeOptions,
    TimingMetrics,
)


# ---- requests ----------------------------------------------------------------------------------
class SamplingBody(Protocol):
    """What every door's body has: these four. Anthropic's leaves ``top_p`` and ``top_k`` unset
    (no cut); the other fields are those of :class:`SamplingFields`, which the others have
    (Anthropic's has ``min_p`` and ``speculative`` as extensions)."""

    @property
    def temperature(self) -> float: ...
    @property
    def top_p(self) -> float | None: ...
    @property
    def top_k(self) -> int | None: ...
    @property
    def seed(self) -> int | None: ...


_DEFAULTS = SamplingFields.model_construct()  # no min_tokens, penalties or bias


def sampling_params(
    body: SamplingBody,
    *,
    logprobs: bool = False,
    top_logprobs: int = 0,
    json_schema: Mapping[str, Any] | None = None,
    beams: tuple[int, float, bool] | None = None,
) -> SamplingParams:
    """The core's sampling; ``beams`` = (beams searched, length penalty, early stopping)."""
    width, length_penalty, early_stopping = beams or (1, 1.0, True)
    more = body if isinstance(body, SamplingFields) else _DEFAULTS
    return SamplingParams(
        min_p=getattr(body, "min_p", None) or 0.0,
        speculative=speculative(getattr(body, "speculative", None)),
        num_beams=width,
        length_penalty=length_penalty,
        early_stopping=early_stopping,
        temperature=0.0 if width > 1 else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        top_k=body.top_k or 0,
        seed=body.seed,
        min_new_tokens=more.min_tokens,
        repetition_penalty=more.repetition_penalty,
        presence_penalty=more.presence_penalty,
        frequency_penalty=more.frequency_penalty,
        logit_bias=more.token_bias(),
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        guidance=json_schema_guidance(json_schema) if json_schema is not None else None,
    )


def speculative(options: SpeculativeOptions | None) -> Speculative | None:
    """A request's ``speculative`` object as the core's override (None: the server's)."""
    if options is None:
        return None
    return Speculative(
        options.num_speculative_tokens, options.prompt_lookup_min, options.prompt_lookup_max
    )


def unset_sampling(body: BaseModel, names: Mapping[str, str] | None = None) -> frozenset[str]:
    """The sampling fields the client left out (or sent as null), in the core's names
    (``names`` maps a core name to the body's where they differ): the core fills them with
    the model's own defaults, or keeps the door's under GENAI_SAMPLING_DEFAULTS=api. A field
    the body does not have is left out too (Anthropic's repetition penalty)."""
    given = body.model_fields_set
    names = names or {}
    return frozenset(
        core
        for core in DEFAULTED_FIELDS
        if (name := names.get(core, core)) not in given or getattr(body, name, None) is None
    )


def chat_prompt(
    messages: Sequence[ChatMessage],
    tools: Sequence[BaseModel] | None = None,
    template_args: Mapping[str, Any] | None = None,
) -> ChatPrompt:
    """The chat; its image parts' URLs become the prompt's image sources, named by where the
    client put them (``messages[0].content[1]``), for the door to load."""
    images = [
        ImageSource(f"messages.{i}.content.{j}", url=part.image_url.url)
        for i, m in enumerate(messages)
        if isinstance(m.content, list)
        for j, part in enumerate(m.content)
        if isinstance(part, ImagePart)
    ]
    return ChatPrompt(
        [m.as_template_message() for m in messages],
        tools=[t.model_dump(exclude_none=True) for t in tools] if tools else None,
        template_args=template_args,
        images=images,
    )


# ---- what the core reports ---------------------------------------------------------------------
Finish = Literal["stop", "length", "tool_calls"]


def finish_reason(reason: ChoiceFinish) -> Finish:
    """How a choice ended, as a door says it. "cancelled" is the door's own doing (its client
    has gone and reads nothing more), so it is told as a plain stop."""
    return "stop" if reason == "cancelled" else reason


def failed_calls(calls: Sequence[FailedCall]) -> list[FailedToolCall] | None:
    """The tool calls a grammar held that the output ended inside, as every door's
    ``failed_tool_calls`` extension has them (None: there were none, and no field)."""
    return [FailedToolCall(name=c.name, reason=c.reason) for c in calls] or None


@dataclass(frozen=True)
class Totals:
    """A request's token counts, as every door reports them (each in its own names)."""

    prompt: int  # every prompt token, read from the cache or not
    completion: int
    cached: int  # prompt tokens whose KV cache was reused
    images: int = 0  # prompt tokens that stand for images
    drafted: int = 0  # n-gram speculation: tokens drafted and verified
    accepted: int = 0  # of those, the tokens taken

    @property
    def uncached_prompt(self) -> int:
        return self.prompt - self.cached

    @property
    def total(self) -> int:
        return self.prompt + self.completion


def totals(usage: Usage) -> Totals:
    return Totals(
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.cached_tokens,
        usage.image_tokens,
        usage.drafted_tokens,
        usage.accepted_tokens,
    )


def timing(metrics: RequestMetrics, model: str) -> TimingMetrics:
    return TimingMetrics(**metrics.as_dict(), model=model)
