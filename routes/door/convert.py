"""HTTP bodies → the core's request pieces, and the core's timing → the ``metrics`` body.

Shared by every HTTP door, so a sampling field means the same on each of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from backends.core.request import ChatPrompt, json_schema_guidance
from backends.core.timing import RequestMetrics
from backends.types import SamplingParams
from schemas.common import ChatMessage, SamplingFields, TimingMetrics


def sampling_params(
    body: SamplingFields,
    *,
    logprobs: bool = False,
    top_logprobs: int = 0,
    json_schema: Mapping[str, Any] | None = None,
    beams: tuple[int, float, bool] | None = None,
) -> SamplingParams:
    """The core's sampling; ``beams`` = (beams searched, length penalty, early stopping)."""
    width, length_penalty, early_stopping = beams or (1, 1.0, True)
    return SamplingParams(
        num_beams=width,
        length_penalty=length_penalty,
        early_stopping=early_stopping,
        temperature=0.0 if width > 1 else body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        seed=body.seed,
        min_new_tokens=body.min_tokens,
        repetition_penalty=body.repetition_penalty,
        presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty,
        logit_bias=body.token_bias(),
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        guidance=json_schema_guidance(json_schema) if json_schema is not None else None,
    )


def chat_prompt(
    messages: Sequence[ChatMessage],
    tools: Sequence[BaseModel] | None = None,
    template_args: Mapping[str, Any] | None = None,
) -> ChatPrompt:
    return ChatPrompt(
        [m.as_template_message() for m in messages],
        tools=[t.model_dump(exclude_none=True) for t in tools] if tools else None,
        template_args=template_args,
    )


def timing(metrics: RequestMetrics, model: str) -> TimingMetrics:
    return TimingMetrics(**metrics.as_dict(), model=model)
