"""Greedy output against a plain og.Generator loop, equal up to near-ties on int4 models.

On int4 models (MatMulNBits, int8 activations) the batch engine's multi-token runs (prefill
chunks, decode steps of several rows) round differently from og.Generator's one-token steps on
some CPU kinds (an AVX2-only AMD EPYC; on AVX-512 machines they agreed): where two
tokens nearly tie, greedy may take the other one. No test may rest on one CPU kind's bits, so
an int4 answer is held to this instead: every token is og's greedy choice after the same
tokens, or trails it by at most :data:`TOLERANCE` in og's logits. At such a near-tie og is
re-anchored on the engine's tokens so far and the comparison goes on, so no later token
escapes; and a row may have only a few near-ties (:data:`TOKENS_PER_NEAR_TIE`). fp32 models
stay exact (``tolerance=None``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backends.core.handle import ChoiceResult
from backends.models.folder import inspect_model_folder
from backends.models.summary import summarize
from tests.conftest import og_max_length

# The most og's token may lead the engine's. Measured on an AVX2 EPYC (onnxruntime 1.31.1) over
# the batch tests' cases on every int4 test model: og's lead where the engine parted from it was
# 0.005-0.047, and over ~155k token pairs at matched steps the engine's leads (from its
# logprobs) were within 0.11 of og's. docs/prefix-sharing.md's ~1.2 is the 30-layer benchmark
# model's; on these 2-layer models 1.2 would pass the runner-up at ~90% of steps, 0.25 at 30-40%.
TOLERANCE = 0.25
# A row may have one near-tie, and one more per this many tokens: measured about one in 1,000
# tokens, never two in a row; the demo's answer to a neighbouring prompt (rows mixed up) passes
# every token at 0.25 but needs three near-ties in 120 tokens.
TOKENS_PER_NEAR_TIE = 100
STOP = -1  # an answer's last token when it ended on an end-of-sequence token


@dataclass(frozen=True)
class Step:
    """One greedy step of og's: the token it picked and the logits it picked from."""

    token: int  # STOP for any end-of-sequence token
    logits: np.ndarray  # [vocabulary], before the pick
    eos: tuple[int, ...] = ()

    def score(self, token: int) -> float:
        if token == STOP:
            return float(self.logits[list(self.eos)].max())
        return float(self.logits[token])

    def lead(self, token: int) -> float:
        """How far og's pick leads ``token`` in og's logits."""
        return self.score(self.token) - self.score(token)


# og's steps after a prompt, with its first tokens forced to the given ones (the engine's).
Follow = Callable[[Sequence[int]], list[Step]]


def tolerance_for(folder: Path) -> float | None:
    """:data:`TOLERANCE` for a quantized model, None (exact) for a float one."""
    quantization = summarize(inspect_model_folder(folder)).quantization
    return TOLERANCE if quantization.startswith("Q") else None


def answer_ids(choice: ChoiceResult) -> list[int]:
    """A result's generated token ids, with STOP last if it ended on end-of-sequence."""
    ids = [t.token_id for t in choice.tokens]
    ended = choice.finish_reason == "stop" and choice.stop_sequence is None
    return [*ids, STOP] if ended else ids


def assert_near_tie(
    got: Sequence[int], follow: Follow, tolerance: float | None, label: str = ""
) -> list[tuple[int, float]]:
    """Fails unless ``got`` is og's greedy answer up to near-ties (exactly, if ``tolerance`` is
    None); returns the near-ties, as (position, og's lead there). ``label`` names the row in
    a failure."""
    row = f"{label}: " if label else ""
    steps = follow(())
    ties: list[tuple[int, float]] = []
    start = 0
    while True:
        end = min(len(got), len(steps))
        k = next((i for i in range(start, end) if got[i] != steps[i].token), end)
        if k == len(got) == len(steps):
            return ties
        assert k < end, f"{row}{len(got)} tokens where og has {len(steps)}, equal up to there"
        lead = steps[k].lead(got[k])
        where = f"{row}token {k} is {got[k]} where og picks {steps[k].token}, by {lead:.4f}"
        assert tolerance is not None, f"{where} (exact model)"
        assert lead <= tolerance, f"{where}, more than {tolerance}"
        ties.append((k, lead))
        allowed = 1 + len(got) // TOKENS_PER_NEAR_TIE
        assert len(ties) <= allowed, f"{row}{len(ties)} near-ties in {len(got)} tokens: {ties}"
        steps = follow(got[: k + 1])  # og, re-anchored on the engine's tokens so far
        start = k + 1


class GreedyOracle:
    """og.Generator on a model folder, greedy, recording its logits before every pick."""

    def __init__(self, folder: Path) -> None:
        import onnxruntime_genai as og

        self.og = og
        self.folder = folder
        self.model = og.Model(str(folder))
        self.tokenizer = og.Tokenizer(self.model)
        self.eos = tuple(int(t) for t in self.tokenizer.eos_token_ids)
        self.tolerance = tolerance_for(folder)

    def encode(self, prompt: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(prompt)]

    def steps(
        self, prompt: str, n: int, min_new: int = 0, forced: Sequence[int] = ()
    ) -> list[Step]:
        """Up to ``n`` steps after ``prompt`` (fewer if it ends), end-of-sequence held back for
        ``min_new`` (og's ``min_length``); the first ``len(forced)`` tokens fed as given, one
        a step, as og feeds its own picks."""
        ids = self.encode(prompt)
        params = self.og.GeneratorParams(self.model)
        params.set_search_options(
            max_length=og_max_length(self.folder, len(ids) + n),
            min_length=len(ids) + min_new,
            do_sample=False,
        )
        gen = self.og.Generator(self.model, params)
        gen.append_tokens(np.asarray(ids, dtype=np.int32))
        steps: list[Step] = []
        while len(steps) < n:
            logits = np.array(gen.get_logits(), dtype=np.float32).reshape(-1)
            if len(steps) < len(forced):
                token = forced[len(steps)]
                if token != STOP:
                    gen.append_tokens(np.asarray([token], dtype=np.int32))
            else:
                gen.generate_next_token()
                token = int(gen.get_next_tokens()[0])
                token = STOP if token in self.eos else token
            steps.append(Step(token, logits, self.eos))
            if token == STOP:
                break
        return steps

    def follow(self, prompt: str, n: int, min_new: int = 0) -> Follow:
        """:meth:`steps` for one prompt, each forced prefix run once (several engine runs are
        held to one oracle)."""
        runs: dict[tuple[int, ...], list[Step]] = {}

        def steps(forced: Sequence[int]) -> list[Step]:
            key = tuple(forced)
            if key not in runs:
                runs[key] = self.steps(prompt, n, min_new, key)
            return runs[key]

        return steps
