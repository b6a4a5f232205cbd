"""onnxruntime-genai's own n-gram speculation on og.Generator (the ``generator`` strategy):
its options from a sequence's settings, what it cannot do, and what it counted.

og 0.18's ``GeneratorParams.set_speculative_options(ngram_size=, max_draft_tokens=)`` looks up
the sequence's last ``ngram_size - 1`` tokens where they stood before in its prompt and
output, verifies up to ``max_draft_tokens`` of the tokens that followed them in one run, and
still hands out one token per ``generate_next_token`` (it buffers the rest). It runs at batch
size 1 (every Generator of this strategy is), not with beam search, images or a KV cache that
slides, and on a model with a sliding attention window only while the sequence fits in the
window: once og's window cache has dropped a position it cannot rewind at all ("Cannot rewind
to N: the sliding-window KV cache holds only the last 528 of 1367 positions", on the demo
model, whatever ``cache_slack``). ``Generator.get_speculative_stats()`` counts, over the
Generator's life, what it did. Reading and replacing the logits each step (what penalties,
``logit_bias``, logprobs, min-p and a lazy tool-call grammar need here) fails while it
speculates ("Speculative decoding logits are not available at the current generation state"),
so a sequence that needs them does not speculate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from backends.engine.scheduler import Refusal
from backends.types import GenerationParams, Speculative

log = logging.getLogger("genai.generator")

# Its longest draft and longest n-gram (ngram_size - 1, ngram_size at most 16).
MAX_DRAFT, MAX_LOOKUP = 16, 15
# Its counters that make up a sequence's usage: tokens drafted, accepted, verify runs.
COUNTS = ("draft_tokens_proposed", "draft_tokens_accepted", "target_verify_forward_passes")
_OG = "on og.Generator, which serves this request (onnxruntime-genai's n-gram)"


def options(own: Speculative) -> dict[str, Any]:
    """og's speculative options for a sequence's settings: its n-gram is one length, the
    longest looked up (``ngram_size`` counts the token it proposes too)."""
    assert own.tokens and own.lookup_max
    return {
        "ngram_size": min(own.lookup_max, MAX_LOOKUP) + 1,
        "max_draft_tokens": min(own.tokens, MAX_DRAFT),
    }


def room(config: Mapping[str, Any]) -> int | None:
    """How many tokens a sequence may hold for og's n-gram to run (it must be able to rewind
    its KV cache): None for any number, 0 for none (a cache that slides), else the model's
    sliding attention window (genai_config.json)."""
    window = config.get("model", {}).get("decoder", {}).get("sliding_window") or {}
    if window.get("slide_key_value_cache"):
        return 0
    return int(window.get("window_size") or 0) or None


def fits(limit: int | None, tokens: int) -> bool:
    """Whether a sequence of at most ``tokens`` tokens fits :func:`room`'s ``limit``."""
    return limit is None or tokens <= limit


def logits_field(params: GenerationParams) -> str | None:
    """The field for which a sequence's logits are read and replaced each step, if any (it
    then cannot speculate on og.Generator)."""
    if params.logprobs or params.top_logprobs:
        return "logprobs"
    for name in ("presence_penalty", "frequency_penalty", "logit_bias"):
        if getattr(params, name):
            return name
    if params.min_p and not params.greedy:
        return "min_p"
    if params.guidance is None and params.call_grammar is not None:
        return "tools"  # tool_choice auto: a lazy call grammar masks the logits
    return None


def refusal(
    asked: Speculative,
    own: Speculative,
    params: GenerationParams,
    limit: int | None,
    tokens: int,
) -> Refusal | None:
    """Why og's n-gram cannot honour a request's ``speculative`` (``asked``; ``own``: the
    sequence's settings with it) for a sequence of up to ``tokens`` tokens (0: not known
    yet), if it cannot. The server's own settings are fitted instead (:func:`options`), or
    left off where they cannot be."""
    if not own.tokens:
        return None
    conflict = logits_field(params)
    if conflict is not None:
        return Refusal(
            "speculative",
            f"n-gram speculation {_OG} cannot be combined with {conflict}, for which the "
            "logits are processed each step (the batch scheduler combines them).",
        )
    if limit == 0:
        return Refusal(
            "speculative",
            f"n-gram speculation is not available {_OG}: this model's KV cache slides, and "
            "it needs one it can rewind.",
        )
    if tokens and not fits(limit, tokens):
        return Refusal(
            "speculative",
            f"n-gram speculation {_OG} needs the prompt and max_tokens ({tokens} tokens) to "
            f"fit this model's {limit}-token attention window: past it, its window cache "
            "cannot rewind. Lower max_tokens or leave speculative out.",
        )
    if asked.tokens is not None and asked.tokens > MAX_DRAFT:
        return Refusal("speculative.num_speculative_tokens", f"at most {MAX_DRAFT} {_OG}.")
    if asked.lookup_max is not None and asked.lookup_max > MAX_LOOKUP:
        return Refusal("speculative.prompt_lookup_max", f"at most {MAX_LOOKUP} {_OG}.")
    if asked.lookup_min is not None and asked.lookup_min != own.lookup_max:
        return Refusal(
            "speculative.prompt_lookup_min",
            f"{_OG[0].upper()}{_OG[1:]}, an n-gram is looked up at one length, "
            f"prompt_lookup_max ({own.lookup_max}): leave prompt_lookup_min out or set it "
            "to that.",
        )
    return None


def counted(before: Mapping[str, float], now: Mapping[str, float]) -> tuple[int, int, int]:
    """Tokens drafted, accepted and verify runs between two snapshots of og's counters."""
    drafted, accepted, runs = (int(now[k] - before.get(k, 0)) for k in COUNTS)
    return drafted, accepted, runs


def count(job: Any, before: Mapping[str, float], now: Mapping[str, float]) -> None:
    """Set what og's n-gram did for a sequence since ``before`` on its ``job`` (its usage),
    and log it as the batch engine logs its own."""
    drafted, accepted, runs = counted(before, now)
    job.drafted_tokens, job.accepted_tokens, job.verify_runs = drafted, accepted, runs
    if runs:
        log.info(
            "speculation: %s drafted %d tokens, accepted %d, in %d verify runs (og)",
            job.id,
            drafted,
            accepted,
            runs,
        )
