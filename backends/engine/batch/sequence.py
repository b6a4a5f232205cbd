"""One sequence of the batch strategy: the row it runs in, what that row holds, the prompt
still to read, and what a chosen token does to it (:mod:`backends.engine.batch.strategy`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backends.engine.batch.guidance import GuidanceError, first_line
from backends.engine.batch.sampler import Choice, RowState
from backends.engine.batch.speculation import Drafter
from backends.engine.logits import logprob_entries
from backends.engine.prefix_cache import chunk_length
from backends.engine.scheduler import Job
from backends.models.loader import LoadedModel
from backends.types import FinishReason, GeneratedToken

# The smallest prefill chunk a step budget leaves: even with many rows decoding, a newcomer's
# prompt goes on being read, in chunks that are not yet much dearer per token than long ones.
MIN_CHUNK = 16

Ending = tuple[FinishReason, str | None]  # why a sequence ends, and the error if any


@dataclass
class Seq:
    job: Job
    row: int
    tokens: list[int]  # tokens whose keys and values the row holds, in order
    pending: list[int]  # prompt tokens still to prefill
    state: RowState
    stream: Any
    exact: int = 0  # the first positions that will be exact once fed (slots.py)
    next_token: int | None = None  # chosen and passed on, not yet fed to the model
    drafter: Drafter | None = None  # its n-gram lookup, once it has drafted

    def next_chunk(self, budget: int) -> tuple[list[int], int]:
        """Take the next chunk (at most ``budget`` tokens, prompts cut in even chunks: no
        short last run) off the pending prompt; returns it and the positions before it."""
        pieces = -(-len(self.pending) // max(budget, 1))
        n = chunk_length(len(self.pending), -(-len(self.pending) // pieces))
        chunk = self.pending[:n]
        del self.pending[:n]
        past = len(self.tokens)
        self.tokens += chunk
        return chunk, past


def chunk_budget(decoding: int, prefill_chunk: int, step_tokens: int) -> int:
    """Prompt tokens one prefill chunk may feed beside ``decoding`` decode rows: what the
    step budget leaves (at least ``MIN_CHUNK``), all of ``prefill_chunk`` when none decodes
    or there is no budget."""
    if decoding == 0 or step_tokens <= 0:
        return prefill_chunk
    return min(prefill_chunk, max(step_tokens - decoding, MIN_CHUNK))


def take(
    seq: Seq, choice: Choice, model: LoadedModel, token_text: Callable[[int], str]
) -> Ending | None:
    """Pass a chosen token on (it is then the sequence's next one to feed), or say why the
    sequence ends with it."""
    token, state, p = choice.token, seq.state, seq.job.params
    if state.guide is not None:
        try:
            state.guide.consume(token)
        except GuidanceError as exc:
            return "grammar_error", first_line(str(exc))
    if token in model.eos_token_ids:
        return "stop", None
    state.accept(token)
    event = GeneratedToken(token, model.token_text(seq.stream, token))
    if choice.logprobs is not None:
        chosen, top = logprob_entries(choice.logprobs, token, p.top_logprobs, token_text)
        event = GeneratedToken(token, event.text, chosen, top)
    if seq.job.emit(event) or (state.guide is not None and state.guide.ended()):
        return "stop", None
    if state.generated >= p.max_new_tokens:
        return "length", None
    seq.next_token = token
    return None
