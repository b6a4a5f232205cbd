"""Strategy "generator": one ``og.Generator`` per active sequence, advanced round-robin.

Each step feeds one prefill chunk or decodes one token for every active sequence, so a new
request starts prefilling at once instead of waiting for a batch to finish. Finished
sequences stay resident in a :class:`PrefixCache`; a later prompt sharing their prefix is
``rewind_to`` the shared length and only the rest is prefilled.

With n-gram speculation on (``GENAI_SPECULATIVE_TOKENS`` or a request's ``speculative``), a
sequence's Generator runs onnxruntime-genai's own n-gram speculation
(``set_speculative_options``: batch size 1, which every Generator here is): it verifies the
tokens that followed the sequence's last ``prompt_lookup_max`` tokens where they stood before,
and still hands out one token per ``generate_next_token``. Not with beam search or images.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backends.engine import last_logits, og_ngram
from backends.engine.batch.guidance import Constraint, Grammars, GuidanceError, Guide, LazyGuide
from backends.engine.batch.sampler import repetition_penalty
from backends.engine.logits import log_softmax, logprob_entries, min_p_cut, process_logits
from backends.engine.og_generator import cuts_min_p, new_generator
from backends.engine.prefix_cache import (
    Held,
    PrefixCache,
    chunk_length,
    images_end,
    reuse_capacity,
    reuse_key,
)
from backends.engine.scheduler import WINDOW_BEAMS, Job, Refusal
from backends.models.loader import LoadedModel
from backends.types import (
    CallGrammar,
    FinishReason,
    GeneratedToken,
    GenerationParams,
    KVUsage,
    Speculative,
)

log = logging.getLogger("genai.generator")


@dataclass
class _Seq:
    job: Job
    gen: Any
    stream: Any
    pending: list[int]
    capacity: int
    key: Hashable | None  # None: this sequence's state may not be reused
    tokens: list[int] = field(default_factory=list)  # tokens fed or produced, in order
    kv_len: int = 0  # how many of ``tokens`` the KV cache holds
    counts: Counter[int] = field(default_factory=Counter)
    min_length: int = 0  # the Generator's own (native) EOS suppression, as a total length
    # The grammar's state beside og's, to end where it ends; or a lazy tool-call grammar,
    # which og cannot run: this strategy masks the logits for it.
    guide: Constraint | None = None
    steps: int = 0  # beam search: search steps taken
    # og's n-gram speculation: its counters when the sequence started (a reused Generator's
    # count on from an earlier sequence's), or None when it does not speculate
    speculating: dict[str, float] | None = None


class _GuidedStepFailed(Exception):
    """A token step of a sequence under a grammar failed."""


class GeneratorStrategy:
    name = "generator"

    def __init__(
        self,
        model: LoadedModel,
        *,
        prefill_chunk: int = 256,
        cache_size: int = 4,
        slots: int = 1,
        speculative: Speculative | None = None,
    ):
        self.model = model
        self.speculative = speculative or Speculative(0)  # the server's; a request may override
        # How long a sequence may grow and still rewind: what og's n-gram may run on, and
        # what a held sequence may be rewound from (a sliding window's cache drops positions)
        self._room = og_ngram.room(model.folder.config)
        self.max_length = model.max_length
        self.slots = slots  # sequences the scheduler runs at once: the KV capacity reported
        self.og_model = model.model  # the weights load here, at start, not at the first request
        if model.adapter_files:
            model.adapters  # noqa: B018 -- and the adapters: a bad file stops the start
        self.prefill_chunk = prefill_chunk
        self.cache: PrefixCache[Any] = PrefixCache(cache_size, min_match=1)
        self._active: list[_Seq] = []
        self._profile_prefix: str | None = None
        self._grammars: Grammars | None = None

    # ---- Strategy ------------------------------------------------------------------------
    def active_jobs(self) -> list[Job]:
        return [s.job for s in self._active]

    def kv_usage(self) -> KVUsage:
        """Tokens the running sequences' Generators hold, of ``slots`` full-length sequences
        (each Generator allocates its own cache; og tells nothing more)."""
        held = sum(s.kv_len for s in self._active)
        return KVUsage(held, self.slots * self.max_length)

    def unsupported(self, params: GenerationParams, prompt_tokens: int = 0) -> str | Refusal | None:
        if params.num_beams > 1 and self.model.folder.sliding_window:
            return WINDOW_BEAMS  # og's beam search fails on any sliding-window attention layer
        asked = params.speculative
        if asked is None:
            return None
        if refused := last_logits.refusal(self.model.folder, params):
            return refused
        tokens = prompt_tokens + params.max_new_tokens if prompt_tokens else 0
        return og_ngram.refusal(asked, self.speculation(params), params, self._room, tokens)

    def speculation(self, params: GenerationParams) -> Speculative:
        """A sequence's n-gram speculation: the server's, under the request's override."""
        asked = params.speculative
        return asked.over(self.speculative) if asked is not None else self.speculative

    def add(self, job: Job) -> None:
        p = job.params
        prompt = job.prompt_ids
        needed = len(prompt) + p.max_new_tokens
        wanted_min = len(prompt) + p.min_new_tokens if p.min_new_tokens else 0
        beams = p.num_beams > 1
        speculate = self._speculates(p, job)
        own = self.speculation(p) if speculate else None
        # (a KV cache that slides rewinds to no position at all, not even its own end)
        reuses = self.cache.size > 0 and not beams and self._room != 0
        key = reuse_key(p, own) if reuses else None
        if speculate and p.min_new_tokens:
            key = None  # a held Generator's own EOS hold could not be fitted to it in Python
        if key is not None and job.image_digests:
            key = (key, "images", job.image_digests)  # never a prefix across other images
        hit = (
            self.cache.take(key, prompt, needed, max_min_length=max(wanted_min, len(prompt)))
            if key is not None
            else None
        )
        if (
            hit is not None
            and job.media is not None
            and hit[1] < images_end(prompt, self.model.image_token_id)
        ):
            self.cache.put(hit[0])  # it shares less than the images: they must be read anew
            hit = None
        stream = self.model.tokenizer.create_stream()
        if hit is not None:
            held, n = hit
            gen = held.state
            gen.rewind_to(n)
            job.cached_tokens = n
            seq = _Seq(
                job,
                gen,
                stream,
                prompt[n:],
                held.capacity,
                key,
                tokens=held.tokens[:n],
                kv_len=n,
                min_length=held.min_length,
            )
        else:
            capacity = reuse_capacity(needed, self.model.max_length) if key is not None else needed
            gen = new_generator(
                self.model,
                self.og_model,
                p,
                capacity,
                wanted_min,
                returns=1 + len(job.followers),
                speculative=own,
            )
            if job.media is not None:
                # The processor's inputs hold the whole prompt: the first step prefills it.
                gen.set_inputs(job.media)
                seq = _Seq(job, gen, stream, [], capacity, key, list(prompt), min_length=wanted_min)
            else:
                seq = _Seq(job, gen, stream, list(prompt), capacity, key, min_length=wanted_min)
        if self._profile_prefix:
            gen.set_runtime_option("enable_profiling", self._profile_prefix)
        if p.guidance is not None and not beams:
            seq.guide = self._guide(*p.guidance)
        elif p.call_grammar is not None and not beams:
            seq.guide = self._lazy(p.call_grammar)
        if speculate:
            seq.speculating = dict(gen.get_speculative_stats())
        self._active.append(seq)

    def _speculates(self, p: GenerationParams, job: Job) -> bool:
        """Whether og's n-gram runs this sequence: its settings say so, and it can (no beam
        search, no images, a KV cache it can rewind: :meth:`unsupported` refused a request
        that asked for it where it cannot)."""
        return (
            self.speculation(p).on
            and p.num_beams == 1
            and job.media is None
            and og_ngram.fits(self._room, len(job.prompt_ids) + p.max_new_tokens)
            and og_ngram.logits_field(p) is None
        )

    def step(self) -> None:
        for seq in list(self._active):
            try:
                self._step(seq)
            except _GuidedStepFailed as exc:
                # og's llguidance refused the model's output (its limits, a grammar that
                # cannot go on): og tells no kinds apart, so a guided token step that fails
                # is the grammar's failure, reported to the client as such (a 400).
                log.warning("job %s: guided step failed: %s", seq.job.id, exc)
                self._finish(seq, "grammar_error", " ".join(str(exc).split("<state>")[0].split()))
            except Exception as exc:
                log.exception("job %s: generation step failed", seq.job.id)
                self._finish(seq, "error", str(exc))

    def drop(self, job: Job, reason: FinishReason) -> None:
        for seq in self._active:
            if seq.job is job:
                self._finish(seq, reason)
                return

    def set_profiling(self, prefix: str | None) -> None:
        self._profile_prefix = prefix
        # Held (cached) generators too: a reused one would otherwise keep profiling.
        for gen in [seq.gen for seq in self._active] + self.cache.states():
            gen.set_runtime_option("enable_profiling", prefix or "0")

    def close(self) -> None:
        self.cache.clear()

    # ---- internals -----------------------------------------------------------------------
    def _grammars_for_model(self) -> Grammars | None:
        tokenizer = self.model.folder.path / "tokenizer.json"
        if not tokenizer.is_file():
            return None
        if self._grammars is None:
            self._grammars = Grammars(tokenizer, self.model.vocab_size, self.model.eos_token_ids)
        return self._grammars

    def _lazy(self, call: CallGrammar) -> LazyGuide | None:
        grammars = self._grammars_for_model()
        return None if grammars is None else grammars.lazy(call)

    def _guide(self, kind: Any, text: str) -> Guide | None:
        """A matcher that follows og's own: og does not say when a grammar is complete."""
        grammars = self._grammars_for_model()
        if grammars is None:
            return None
        try:
            return grammars.matcher(kind, text)
        except GuidanceError as exc:  # og compiles its own: the request goes on without one
            log.warning("no grammar follower: %s", exc)
            return None

    def _step(self, seq: _Seq) -> None:
        if seq.job.params.num_beams > 1:
            self._beam_step(seq)
            return
        if seq.pending:
            n = chunk_length(len(seq.pending), self.prefill_chunk)
            chunk = seq.pending[:n]
            del seq.pending[:n]
            seq.gen.append_tokens(np.asarray(chunk, dtype=np.int32))
            seq.tokens += chunk
            seq.kv_len = len(seq.tokens)
            return
        p = seq.job.params
        if p.guidance is None:
            self._decode(seq)
            return
        try:
            self._decode(seq)
        except Exception as exc:
            raise _GuidedStepFailed(str(exc)[:2000]) from exc

    def _decode(self, seq: _Seq) -> None:
        p = seq.job.params
        logprobs = None
        min_p = cuts_min_p(p)
        # og holds EOS back natively (min_length), after our logits: min-p's cut must see it
        # held back already, as the batch sampler's does.
        suppress_eos = seq.job.generated < p.min_new_tokens and (
            min_p or seq.min_length != len(seq.job.prompt_ids) + p.min_new_tokens
        )
        lazy = p.guidance is None and seq.guide is not None and seq.guide.constrains
        if suppress_eos or p.edits_logits or lazy or min_p:
            logits = process_logits(
                seq.gen.get_logits(),
                p,
                seq.counts,
                self.model.eos_token_ids,
                suppress_eos=suppress_eos,
            )
            if min_p and p.repetition_penalty != 1.0:
                repetition_penalty(logits, seq.tokens, p.repetition_penalty)
            if (lazy or min_p) and seq.guide is not None and seq.guide.constrains:
                seq.guide.mask(logits)  # og masks the same for a schema: the cut sees it
            if min_p:
                min_p_cut(logits, p.min_p, p.temperature)
            seq.gen.set_logits(logits.reshape(1, 1, -1))
            if p.logprobs or p.top_logprobs:
                logprobs = log_softmax(logits)
        seq.gen.generate_next_token()
        token = int(seq.gen.get_next_tokens()[0])
        seq.kv_len = len(seq.tokens)
        seq.tokens.append(token)
        if token in self.model.eos_token_ids:
            self._finish(seq, "stop")
            return
        seq.counts[token] += 1
        if seq.guide is not None:
            try:
                seq.guide.consume(token)
            except GuidanceError as exc:  # og's own llguidance let it through: og decides
                log.warning("job %s: the grammar's follower disagrees with og: %s", seq.job.id, exc)
                seq.guide = None
        event = GeneratedToken(token, self.model.token_text(seq.stream, token))
        if logprobs is not None:
            chosen, top = logprob_entries(logprobs, token, p.top_logprobs, self._token_text)
            event = GeneratedToken(token, event.text, chosen, top)
        # A complete grammar (a forced call written) ends the sequence: og would otherwise
        # fail on the next step while min_tokens holds EOS back.
        if seq.job.emit(event) or (seq.guide is not None and seq.guide.ended()):
            self._finish(seq, "stop")
        elif seq.job.generated >= p.max_new_tokens or seq.gen.is_done():
            self._finish(seq, "length")

    def _beam_step(self, seq: _Seq) -> None:
        """Beam search: the prompt in one piece, then one search step per scheduler step;
        when the search ends, each returned beam goes to its choice's job."""
        if seq.pending:
            seq.gen.append_tokens(np.asarray(seq.pending, dtype=np.int32))
            seq.pending = []
            return
        seq.gen.generate_next_token()
        seq.steps += 1
        if seq.steps < seq.job.params.max_new_tokens and not seq.gen.is_done():
            return
        self._active.remove(seq)
        prompt_length = len(seq.job.prompt_ids)
        for i, job in enumerate(seq.job.followers):
            self._hand_over(job, seq.gen.get_sequence(i + 1)[prompt_length:])
        self._hand_over(seq.job, seq.gen.get_sequence(0)[prompt_length:])

    def _hand_over(self, job: Job, tokens: Any) -> None:
        """A returned beam to its job, token by token (stop strings apply as usual)."""
        stream = self.model.tokenizer.create_stream()
        for token in (int(t) for t in tokens[: job.params.max_new_tokens]):
            if token in self.model.eos_token_ids:
                job.finish("stop")
                return
            if job.emit(GeneratedToken(token, self.model.token_text(stream, token))):
                job.finish("stop")
                return
        job.finish("length")

    def _token_text(self, token: int) -> str:
        return str(self.model.tokenizer.decode(np.asarray([token], dtype=np.int32)))

    def _finish(self, seq: _Seq, reason: FinishReason, error: str | None = None) -> None:
        self._active.remove(seq)
        if seq.speculating is not None:  # what og's n-gram did for it, on its job
            og_ngram.count(seq.job, seq.speculating, seq.gen.get_speculative_stats())
        seq.job.finish(reason, error)
        if seq.key is not None and reason in ("stop", "length") and seq.kv_len > 0:
            rewinds = og_ngram.fits(self._room, seq.kv_len)  # past the window: from its end only
            tokens = seq.tokens[: seq.kv_len]
            self.cache.put(Held(seq.key, tokens, seq.capacity, seq.gen, seq.min_length, rewinds))
        # Otherwise the generator is dropped here, on the owner thread, freeing its KV cache.
