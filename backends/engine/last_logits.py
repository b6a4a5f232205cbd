"""A model whose graph computes the logits of the last position it is fed only
(``ModelFolder.last_logits_only``: the builder's ``prune_lm_head``, what ``main_genai.py
export`` makes for the CPU unless ``--all-logits``).

Generation reads only those: the batch engine feeds a prompt one row at a time and decode
steps one token per row, and og.Generator (beam search included) runs it as it is. Two things
need every fed position's logits:

- n-gram speculation, which verifies each drafted token at the position it was fed (the
  batch engine's verify run; og 0.18 refuses its own: "N-gram decoding requires target logits
  for every verified token; pruned last-token-only logits are not supported in this
  release"). The server's setting is turned off at start, with one log line; a request's
  ``speculative`` is refused, naming the field.
- onnxruntime-genai's Engine on a static batch, which sizes the logits for every prompt
  token and fails each request ("ENGINE_EXECUTION_FAILURE"): ``GENAI_SCHEDULER=engine`` is
  refused at start.
"""

from __future__ import annotations

import dataclasses
import logging

from backends.engine.scheduler import Refusal
from backends.models.folder import ModelFolder
from backends.types import GenerationParams, Speculative

log = logging.getLogger("genai.scheduler")

WHY = (
    "this model computes the logits of the last position it is fed only (built with "
    "prune_lm_head, as `main_genai.py export` builds for the CPU)"
)
REBUILD = "export it again with --all-logits"


def server_speculation(
    folder: ModelFolder, own: dict[str, Speculative], *, asked: bool = True
) -> dict[str, Speculative]:
    """The server's speculation settings by scheduler, for this model: all off where it
    cannot verify drafts, said once in the log if one was on (a warning if the operator
    ``asked`` for it, GENAI_SPECULATIVE_TOKENS; a note where it was the default)."""
    if not (folder.last_logits_only and any(s.on for s in own.values())):
        return own
    log.log(
        logging.WARNING if asked else logging.INFO,
        "n-gram speculation is off (GENAI_SPECULATIVE_TOKENS=%d): %s, and verifying drafted "
        "tokens needs every position's; to speculate, %s.",
        max(s.tokens or 0 for s in own.values()),
        WHY,
        REBUILD,
    )
    return {name: dataclasses.replace(s, tokens=0) for name, s in own.items()}


def refusal(folder: ModelFolder, params: GenerationParams) -> Refusal | None:
    """A request that asks for speculation on a model that cannot verify drafts."""
    asked = params.speculative
    if asked is None or not asked.asks or not folder.last_logits_only:
        return None
    return Refusal(
        "speculative",
        f"n-gram speculation is not available: {WHY}, and verifying drafted tokens needs "
        f"every position's. Leave speculative out, or {REBUILD}.",
    )


def engine_refusal(folder: ModelFolder) -> str | None:
    """Why onnxruntime-genai's Engine cannot serve this model, if it cannot."""
    if not folder.last_logits_only:
        return None
    return (
        f"GENAI_SCHEDULER=engine cannot serve it: {WHY}, and onnxruntime-genai's Engine sizes "
        f"the logits for every prompt token and fails each request. Use auto, batch or "
        f"generator, or {REBUILD}."
    )
