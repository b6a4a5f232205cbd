"""An ``og.Generator`` for one sequence: our generation parameters as onnxruntime-genai's
search, speculation and guidance options (:mod:`backends.engine.generator` runs it)."""

from __future__ import annotations

from typing import Any

from backends.engine import og_ngram
from backends.models.loader import LoadedModel
from backends.types import GenerationParams, Speculative


def cuts_min_p(params: GenerationParams) -> bool:
    """Whether min-p changes the draw: only when sampling (greedy keeps the likeliest)."""
    return params.min_p > 0 and not params.greedy


def new_generator(
    model: LoadedModel,
    og_model: Any,
    p: GenerationParams,
    capacity: int,
    min_length: int,
    returns: int = 1,
    speculative: Speculative | None = None,
) -> Any:
    og = model.og
    params = og.GeneratorParams(og_model)
    capacity = model.folder.kv_capacity(capacity)  # a sequence ends at its own limit
    options: dict[str, Any] = {"max_length": capacity, "do_sample": not p.greedy}
    if p.num_beams > 1:
        options.update(
            num_beams=p.num_beams,
            num_return_sequences=returns,
            length_penalty=p.length_penalty,
            early_stopping=p.early_stopping,
        )
    if min_length:
        # Native EOS suppression: no per-step logits round trip for min_tokens.
        options["min_length"] = min_length
    if p.repetition_penalty != 1.0 and not cuts_min_p(p):
        # (with min-p, the generator strategy applies it before the cut, as the batch sampler)
        options["repetition_penalty"] = p.repetition_penalty
    if not p.greedy:
        options.update(temperature=p.temperature, top_p=p.top_p, top_k=p.top_k)
        if p.seed is not None:
            options["random_seed"] = p.seed
    params.set_search_options(**options)
    if speculative is not None:
        params.set_speculative_options(**og_ngram.options(speculative))
    if p.guidance is not None:
        params.set_guidance(*p.guidance)
    generator = og.Generator(og_model, params)
    if p.adapter is not None:
        generator.set_active_adapter(model.adapters, p.adapter)
    return generator
