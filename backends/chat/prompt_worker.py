"""Very large prompts are rendered and tokenized in a worker process.

onnxruntime-genai's tokenizer holds the GIL while it encodes (a 4M-character prompt: 0.2-0.3 s
here, with another thread stalled the whole time), so done in the server's process it would
freeze every stream. Prompts above ``THRESHOLD_CHARS`` go to one spawned process that has its
own tokenizer; the event loop only awaits the result. Smaller prompts are tokenized on the
owner thread in about a millisecond, as before.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from backends.chat.prompts import render_and_encode
from backends.chat.template import TemplateSet
from backends.types import PreparedPrompt, Prompt

THRESHOLD_CHARS = 32 * 1024

# The worker process's own state, set once by its initializer (a process pool offers no
# other place for it); nothing in the server process touches it.
_state: dict[str, Any] = {}


def _start(folder: str, templates: TemplateSet, specials: tuple[str, ...]) -> None:
    import onnxruntime_genai as og

    _state.update(tokenizer=og.Tokenizer(folder), templates=templates, specials=specials)


def _prepare(prompts: Sequence[Prompt], param: str) -> list[PreparedPrompt]:
    tokenizer, templates, specials = _state["tokenizer"], _state["templates"], _state["specials"]
    return [render_and_encode(tokenizer, templates, specials, p, param) for p in prompts]


class PromptWorker:
    """One worker process for one model folder, started on first use."""

    def __init__(self, folder: Path, templates: TemplateSet, specials: tuple[str, ...]) -> None:
        self._args = (str(folder), templates, specials)
        self._pool: ProcessPoolExecutor | None = None

    async def prepare(self, prompts: Sequence[Prompt], param: str) -> list[PreparedPrompt]:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
                initargs=self._args,
            )
        return await asyncio.wrap_future(self._pool.submit(_prepare, list(prompts), param))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
