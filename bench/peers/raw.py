"""The raw onnxruntime-genai loop, in-process: the ceiling the server is measured against.

Same settings as the server: an ``og.Config`` overlay sets the decoder's intra-op thread count
(the server uses the CPUs the process may use unless GENAI_INTRA_OP_THREADS is set). Greedy,
a fixed number of new tokens (``min_length`` = ``max_length`` so EOS cannot end it early).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backends.models.folder import inspect_model_folder


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


@dataclass
class RawResult:
    ttft: float  # prompt in → first new token out (prefill + first sampling), seconds
    decode_tps: float  # (n - 1) / (t_last - t_first)
    e2e: float
    output_tokens: int
    prompt_tokens: int

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


class RawEngine:
    """One ``og.Model`` with a session-options overlay; runs single greedy sequences."""

    def __init__(
        self, model_dir: Path, threads: int | None = None, spinning: bool | None = None
    ) -> None:
        import onnxruntime_genai as og

        self.og = og
        session: dict[str, Any] = {"intra_op_num_threads": threads or usable_cpus()}
        if spinning is not None:
            session["session.intra_op.allow_spinning"] = "1" if spinning else "0"
        cfg = og.Config(str(model_dir))
        cfg.overlay(json.dumps({"model": {"decoder": {"session_options": session}}}))
        self.model = og.Model(cfg)
        self.tokenizer = og.Tokenizer(self.model)
        self.folder = inspect_model_folder(model_dir)

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text)]

    def _generator(self, total: int, fixed: bool) -> Any:
        params = self.og.GeneratorParams(self.model)
        opts: dict[str, Any] = {"max_length": self.folder.kv_capacity(total), "do_sample": False}
        if fixed:
            opts["min_length"] = total
        params.set_search_options(**opts)
        return self.og.Generator(self.model, params)

    def run(self, prompt_ids: list[int], new_tokens: int) -> RawResult:
        gen = self._generator(len(prompt_ids) + new_tokens, fixed=True)
        t0 = time.perf_counter()
        gen.append_tokens(np.asarray(prompt_ids, dtype=np.int32))
        stamps = []
        while not gen.is_done() and len(stamps) < new_tokens:
            gen.generate_next_token()
            gen.get_next_tokens()
            stamps.append(time.perf_counter())
        del gen
        n = len(stamps)
        decode = (n - 1) / (stamps[-1] - stamps[0]) if n > 1 else 0.0
        return RawResult(stamps[0] - t0, decode, stamps[-1] - t0, n, len(prompt_ids))

    def turn_ttft(
        self, history_ids: list[int], reply_tokens: int, next_ids: list[int]
    ) -> tuple[float, float]:
        """TTFT of the next chat turn (seconds): (reusing the cache, full re-prefill).

        With reuse, the generator that produced the previous reply continues: only the new
        turn's tokens are appended. Without, a fresh generator prefills everything.
        """
        total = len(history_ids) + reply_tokens + len(next_ids) + 8
        gen = self._generator(total, fixed=False)
        gen.append_tokens(np.asarray(history_ids, dtype=np.int32))
        reply = []
        for _ in range(reply_tokens):
            gen.generate_next_token()
            reply.append(int(gen.get_next_tokens()[0]))
        t0 = time.perf_counter()
        gen.append_tokens(np.asarray(next_ids, dtype=np.int32))
        gen.generate_next_token()
        gen.get_next_tokens()
        reuse = time.perf_counter() - t0
        del gen
        full_ids = history_ids + reply + next_ids
        fresh = self._generator(len(full_ids) + 8, fixed=False)
        t0 = time.perf_counter()
        fresh.append_tokens(np.asarray(full_ids, dtype=np.int32))
        fresh.generate_next_token()
        fresh.get_next_tokens()
        full = time.perf_counter() - t0
        del fresh
        return reuse, full

    def prefill(self, ids: list[int], chunk: int) -> float:
        """Seconds from prompt in to first token, appending the prompt ``chunk`` tokens at a
        time (what the server's GENAI_PREFILL_CHUNK does)."""
        gen = self._generator(len(ids) + 8, fixed=False)
        t0 = time.perf_counter()
        for i in range(0, len(ids), chunk):
            gen.append_tokens(np.asarray(ids[i : i + chunk], dtype=np.int32))
        gen.generate_next_token()
        gen.get_next_tokens()
        elapsed = time.perf_counter() - t0
        del gen
        return elapsed
