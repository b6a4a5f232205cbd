"""The core of an encoder model: ``embed()`` for an embedder, ``score()`` for a reranker.

A request is checked (inputs, prompts, dimensions), admitted like a generation (503 draining
or loading, 429 at capacity), tokenized off the event loop, checked for length (an over-long
input is a 400 naming its index unless the request asks for truncation: never cut silently),
and handed to the owner thread's micro-batcher one future per input. Leaving the await (a
client gone, a timeout) cancels the inputs not yet run.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from backends.config import ServiceConfig
from backends.core.model_service import (
    ModelService,
    Observer,
    RequestStats,
    ServiceStats,
    Status,
)
from backends.core.owner import current_owner
from backends.engine.encoder.pooling import Array, normalized, shortened, sigmoid
from backends.engine.encoder.runner import EncoderRunner
from backends.engine.encoder.tokenize import Encoded, EncoderTokenizer
from backends.engine.encoder.worker import EncoderWorker
from backends.errors import Aside, ContextLengthExceeded, Field, InvalidRequest, RequestTimedOut
from backends.models.encoder import KINDS, EncoderSpec, detect_kind, read_model_encoder
from backends.text import check_text

Inputs = Sequence[str] | Sequence[Sequence[int]]
QUERY_TYPES = {"query": "query", "search_query": "query", "document": "document"}
QUERY_TYPES["search_document"] = "document"
# The fields an error names, by the core's names (a door tells them in its own): an embedding's
# inputs; a pair's query and document, and the pairs; the truncation asked for.
INPUTS, QUERY, DOCUMENT, PAIRS = Field("inputs"), Field("query"), Field("document"), Field("pairs")
TRUNCATE = Field("truncate")
CUT = Aside(", or ask for truncation ({})", TRUNCATE)  # where a door can ask for it


@dataclass(frozen=True)
class EmbedRequest:
    inputs: Inputs
    model: str | None = None
    prompt_name: str | None = None  # a named prompt of the model (config_sentence_transformers)
    input_type: str | None = None  # "query" / "document": that prompt if the model has one
    dimensions: int | None = None  # Matryoshka: the first N values, re-normalised
    truncate: int | None = None  # None: refuse over-long inputs; -1: the model's limit; N: N
    request_id: str | None = None


@dataclass(frozen=True)
class EmbedResult:
    vectors: list[Array]
    prompt_tokens: int


@dataclass(frozen=True)
class ScoreResult:
    scores: list[float]  # sigmoid of the logit, in the order of the pairs
    logits: list[float]
    prompt_tokens: int


@dataclass(eq=False)
class _Flight:
    inputs: int
    tokens: int = 0
    started: float = field(default_factory=time.perf_counter)
    futures: list[Future[Array]] = field(default_factory=list)
    owner: str | None = field(default_factory=current_owner)  # whose it is


class EncoderService(ModelService):
    def __init__(self, config: ServiceConfig, observer: Observer | None = None) -> None:
        super().__init__(config, observer)
        m = config.model
        self.spec: EncoderSpec | None = None
        self.tokenizer: EncoderTokenizer | None = None
        self._worker = EncoderWorker(
            self._load,
            batch_tokens=m.batch_tokens,
            wait=m.batch_wait_ms / 1000,
            name=f"encoder-{m.name}",
        )
        found = m.kind if m.kind in KINDS else detect_kind(m.path, m.variant)
        self.kind = "reranker" if found == "reranker" else "embedding"  # read again on load
        self._inflight: dict[str, _Flight] = {}
        self._ids = itertools.count(1)

    def _load(self) -> EncoderRunner:
        """On the owner thread: the folder read, the tokenizer and the session."""
        m = self.config.model
        spec = read_model_encoder(m)
        self.tokenizer = EncoderTokenizer(spec.tokenizer_path)
        runner = EncoderRunner(spec, m.intra_op_threads)
        self.spec = spec
        self.kind = spec.kind
        return runner

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        self._worker.start()
        await asyncio.get_running_loop().run_in_executor(None, self._worker.loaded.wait)
        if self._worker.load_error is not None:
            raise self._worker.load_error

    async def stop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._worker.stop)

    async def drain(self, timeout: float) -> int:
        self.draining = True
        deadline = time.monotonic() + timeout
        while self._inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        left = list(self._inflight)
        for request_id in left:
            self.cancel(request_id)
        return len(left)

    # ---- read-only state -----------------------------------------------------------------
    @property
    def status(self) -> Status:
        if not self._worker.loaded.is_set():
            return "loading"
        return "error" if self._worker.load_error is not None else "ok"

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def max_length(self) -> int | None:
        return self.spec.max_length if self.spec is not None else None

    @property
    def strategy_name(self) -> str | None:
        return "encoder"

    @property
    def dimensions(self) -> int | None:
        runner = self._worker.runner
        return runner.width if runner is not None and self.kind == "embedding" else None

    def stats(self) -> ServiceStats:
        now = time.perf_counter()
        requests = tuple(
            RequestStats(rid, "running", f.tokens, 0, now - f.started, owner=f.owner)
            for rid, f in list(self._inflight.items())
        )
        return ServiceStats(running=len(requests), waiting=0, requests=requests)

    def cancel(self, request_id: str) -> bool:
        flight = self._inflight.get(request_id)
        if flight is None:
            return False
        for future in flight.futures:
            future.cancel()
        return True

    # ---- requests ------------------------------------------------------------------------
    async def embed(self, request: EmbedRequest) -> EmbedResult:
        # The count in plain words, not a field: every embedding door says "inputs".
        spec, tokenizer = self._check(request.model, "embedding", len(request.inputs), "inputs")
        dims, width = request.dimensions, self.dimensions or 0
        if dims is not None and not 0 < dims <= width:
            field = Field("dimensions")
            raise InvalidRequest(
                [field, f" must be between 1 and the model's {width}; got {dims}."], param=field
            )
        prefix = self._prompt(spec, request.prompt_name, request.input_type)
        limit = _limit(request.truncate, spec.max_length)
        texts = [x for x in request.inputs if isinstance(x, str)]
        if texts and len(texts) != len(request.inputs):
            raise InvalidRequest([INPUTS, " mixes strings and token lists."], param=INPUTS)
        for i, x in enumerate(request.inputs):
            if len(x) == 0:
                raise InvalidRequest([INPUTS, f"[{i}] is empty."], param=INPUTS)
        check_text(texts, INPUTS, nul=False, within="input")
        texts = [t for (t,) in _fit([(prefix + t,) for t in texts], spec, limit, False)]

        def prepare() -> list[Encoded]:
            if texts:
                return tokenizer.texts(texts, limit, INPUTS)
            if prefix:
                raise InvalidRequest(
                    "A named prompt cannot be applied to token ids; send text.",
                    param=Field("prompt_name"),
                )
            rows = [Encoded([int(t) for t in x]) for x in request.inputs]
            self._check_vocab(rows, spec)
            return [Encoded(r.ids[:limit]) for r in rows] if limit else rows

        out = await self._run(request.request_id, len(request.inputs), prepare, spec)
        vectors = [normalized(v) if spec.normalize else v for v in out[0]]
        vectors = [shortened(v, dims, spec.normalize) for v in vectors]
        return EmbedResult(vectors, out[1])

    async def score(
        self,
        pairs: Sequence[tuple[str, str]],
        model: str | None = None,
        truncate: int | None = None,
        request_id: str | None = None,
    ) -> ScoreResult:
        """A reranker's relevance of each (query, document) pair."""
        spec, tokenizer = self._check(model, "reranker", len(pairs), PAIRS)
        for i, (query, document) in enumerate(pairs):
            if not query:
                raise InvalidRequest(["The ", QUERY, " is empty."], param=QUERY)
            if not document:
                raise InvalidRequest(f"Document {i} is empty.", param=DOCUMENT)
        check_text(list(dict.fromkeys(q for q, _ in pairs)), QUERY, nul=False, within="query")
        check_text([d for _, d in pairs], DOCUMENT, nul=False, within="document")
        limit = _limit(truncate, spec.max_length)
        pairs = _fit(pairs, spec, limit, True)
        logits, tokens = await self._run(
            request_id, len(pairs), lambda: tokenizer.pairs(pairs, limit, DOCUMENT), spec
        )
        first = np.array([float(row[0]) for row in logits], dtype=np.float32)
        return ScoreResult([float(s) for s in sigmoid(first)], [float(x) for x in first], tokens)

    # ---- internals -----------------------------------------------------------------------
    def _check(
        self, model: str | None, wanted: str, count: int, things: str
    ) -> tuple[EncoderSpec, EncoderTokenizer]:
        """The loaded model of the ``wanted`` kind, with room for a request of ``count``
        ``things`` (as its errors call them: a :class:`Field`, or plain words)."""
        self._check_model(model)
        self._refuse_if_closed()
        if self.kind != wanted:
            self._wrong_kind(wanted)
        assert self.spec is not None and self.tokenizer is not None
        cap = self.config.model.max_inputs
        if count == 0:
            raise InvalidRequest(["The request has no ", things, "."], param=things)
        if count > cap:
            raise InvalidRequest(
                [
                    f"The request holds {count} ",
                    things,
                    f"; this model takes at most {cap} at once.",
                ],
                param=things,
            )
        limits = self.config.limits
        limit = limits.max_concurrency + limits.max_queue
        if len(self._inflight) >= limit:
            raise self._overloaded(len(self._inflight), limit, "requests")
        return self.spec, self.tokenizer

    def _prompt(self, spec: EncoderSpec, name: str | None, input_type: str | None) -> str:
        if name is not None:
            if name not in spec.prompts:
                known = ", ".join(repr(p) for p in spec.prompts) or "none"
                raise InvalidRequest(
                    f"The model has no prompt named {name!r} (it has: {known}).",
                    param=Field("prompt_name"),
                )
            return spec.prompts[name]
        if input_type is not None:
            role = QUERY_TYPES.get(input_type)
            if role is None:
                field = Field("input_type")
                raise InvalidRequest(
                    [field, f" must be one of {', '.join(QUERY_TYPES)}; got {input_type!r}."],
                    param=field,
                )
            return spec.prompts.get(role, "")
        return spec.prompts.get(spec.default_prompt or "", "")

    def _check_vocab(self, rows: list[Encoded], spec: EncoderSpec) -> None:
        vocab = spec.vocab_size or (self.tokenizer.vocab_size if self.tokenizer else 0)
        for i, row in enumerate(rows):
            bad = sorted({t for t in row.ids if not 0 <= t < vocab})
            if bad:
                raise InvalidRequest(
                    [
                        INPUTS,
                        f"[{i}] holds token ids outside the model's vocabulary (0..{vocab - 1}): "
                        f"{bad[:10]}. Send text, or ids from this model's tokenizer (LangChain: "
                        "check_embedding_ctx_length=False).",
                    ],
                    param=INPUTS,
                )

    async def _run(
        self,
        request_id: str | None,
        count: int,
        prepare: Callable[[], list[Encoded]],
        spec: EncoderSpec,
    ) -> tuple[list[Array], int]:
        rid = request_id or f"enc-{next(self._ids)}"
        while rid in self._inflight:
            rid = f"{rid}-{next(self._ids)}"
        flight = self._inflight[rid] = _Flight(count)
        self._worker.expect(1)
        expected = True
        try:
            rows = await asyncio.to_thread(prepare)
            _check_lengths(rows, spec.max_length, self.kind == "reranker")
            flight.tokens = sum(len(r.ids) for r in rows)
            expected = False
            flight.futures = [w.future for w in self._worker.submit(rows, expected=True)]
            waiting = asyncio.gather(*(asyncio.wrap_future(f) for f in flight.futures))
            try:
                out = await asyncio.wait_for(waiting, self.config.limits.request_timeout)
            except asyncio.TimeoutError:
                raise RequestTimedOut("The request took longer than the server allows.") from None
            finally:
                for future in flight.futures:
                    future.cancel()  # those not run yet are dropped; the rest are done
        finally:
            if expected:
                self._worker.expect(-1)
            self._inflight.pop(rid, None)
        if self.observer is not None:
            self.observer.on_encoded(count, flight.tokens, time.perf_counter() - flight.started)
        return list(out), flight.tokens


def _limit(truncate: int | None, max_length: int) -> int | None:
    """Where to cut inputs: None (nowhere: too long is refused), or a token count."""
    if truncate is None:
        return None
    if truncate == -1:
        return max_length
    if not 0 < truncate <= max_length:
        raise InvalidRequest(
            [TRUNCATE, f" must be -1 or between 1 and the model's {max_length}; got {truncate}."],
            param=TRUNCATE,
        )
    return truncate


T = TypeVar("T", tuple[str], tuple[str, str])


def _fit(inputs: Sequence[T], spec: EncoderSpec, limit: int | None, pairs: bool) -> list[T]:
    """Inputs (texts, or query-document pairs) bounded by characters before they are
    tokenized, so that a client's megabytes never become millions of tokens: with truncation
    to ``limit`` tokens, each text is cut where it surely holds more than that; without, an
    input surely longer than the model's maximum is refused here (a shorter one that still
    does not fit is refused once tokenized)."""
    if limit is not None:
        cut = spec.max_chars(limit)
        return [tuple(t[:cut] for t in x) for x in inputs] if cut else list(inputs)  # type: ignore[misc]
    bound = spec.max_chars(spec.max_length)
    what, param = _what(pairs)
    for i, x in enumerate(inputs):
        chars = sum(len(t) for t in x)
        if bound is not None and chars > bound:
            raise ContextLengthExceeded(
                [
                    f"{what.format(i)} has {chars} characters: far more than this model's "
                    f"maximum of {spec.max_length} tokens can hold. Shorten it",
                    CUT,
                    ".",
                ],
                param=param,
            )
    return list(inputs)


def _what(pairs: bool) -> tuple[str, Field]:
    """An input as a message calls it (by its index), and the field it is a part of."""
    return ("Document {} with the query", DOCUMENT) if pairs else ("Input {}", INPUTS)


def _check_lengths(rows: Sequence[Encoded], max_length: int, pairs: bool) -> None:
    what, param = _what(pairs)
    for i, row in enumerate(rows):
        if not row.ids:
            raise InvalidRequest(f"{what.format(i)} has no tokens.", param=param)
        if len(row.ids) > max_length:
            raise ContextLengthExceeded(
                [
                    f"{what.format(i)} is {len(row.ids)} tokens long; this model takes at most "
                    f"{max_length}. Shorten it",
                    CUT,
                    ".",
                ],
                param=param,
            )
