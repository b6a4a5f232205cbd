"""A model folder's own sampling defaults: its genai_config.json "search" section, read as
onnxruntime-genai reads it (the builder writes it from the Hugging Face generation_config.json).

They are what a plain ``og.Generator`` on the folder does when nothing is set, in the core's
terms (``SamplingParams``: temperature 0 is greedy, top_k 0 and top_p 1 cut nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The request fields a model's defaults fill when the client leaves them out.
DEFAULTED_FIELDS = frozenset({"temperature", "top_p", "top_k", "repetition_penalty"})


@dataclass(frozen=True)
class SamplingDefaults:
    """One of :data:`DEFAULTED_FIELDS` each, as ``SamplingParams`` names and reads them."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0


def search_defaults(search: Mapping[str, Any]) -> SamplingDefaults:
    """og's Generator picks the top token unless ``do_sample`` (off by default), and also
    when ``top_k`` is 1 or ``temperature`` 0; otherwise it samples at ``temperature`` (1)
    within ``top_k`` (50; 0 is no cut) and ``top_p`` (0: no cut, as is 1). Its repetition
    penalty applies either way."""
    penalty = float(search.get("repetition_penalty", 1.0))
    temperature = float(search.get("temperature", 1.0))
    top_k = int(search.get("top_k", 50))
    if not search.get("do_sample", False) or top_k == 1 or temperature == 0:
        return SamplingDefaults(repetition_penalty=penalty)
    top_p = float(search.get("top_p", 0.0))
    return SamplingDefaults(
        temperature=temperature,
        top_p=top_p if 0.0 < top_p < 1.0 else 1.0,
        top_k=max(top_k, 0),
        repetition_penalty=penalty,
    )
