"""The in-process front door, without HTTP: ``OnnxTextGenerator``, as the Cloud Run article has it.

    with OnnxTextGenerator(model_dir="models/demo-llama") as gen:
        print(gen.generate("Once upon a time", max_new_tokens=32)["generated_text"])
        for chunk, meta in gen.stream_generate([{"role": "user", "content": "Hi"}]):
            print(chunk, end="", flush=True)

It submits to the same core as the HTTP routes (same owner thread, scheduler and settings)
from an asyncio loop running in a background thread, so it can be called from plain
synchronous code, from several threads at once. Stop strings, ``n`` choices, seeds, logprobs
and JSON-schema output work as they do over HTTP. Given an embedding or reranker folder, the
same class answers ``embed()`` and ``rerank()``, as /v1/embeddings and /v1/rerank do.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Coroutine, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from backends.config import service_config
from backends.core.encoder_service import EmbedRequest, EncoderService
from backends.core.handle import ChoiceResult, RequestHandle, Result
from backends.core.registry import make_service
from backends.core.request import ChatPrompt, GenerationRequest, TextPrompt, json_schema_guidance
from backends.errors import GenAIError
from backends.models.sampling import DEFAULTED_FIELDS
from backends.types import GeneratedToken, SamplingParams, Speculative
from config.models_file import model_fields
from config.settings import Settings

T = TypeVar("T")
# The core's fields this door calls otherwise (its options), for errors; the rest of its
# options are the core's own names (num_beams, top_k, speculative...).
_OPTIONS = {"max_tokens": "max_new_tokens", "guidance": "json_schema", "beam_width": "num_beams"}
# The encoder core's fields that embed() and rerank() call otherwise; rerank() has no truncation.
_EMBED = {"inputs": "texts"}
_RERANK = {"pairs": "documents", "document": "documents", "truncate": ""}
Prompt = str | Sequence[Mapping[str, Any]]  # raw text, or chat messages for the chat template

_END = object()
# This door's own sampling defaults (GENAI_SAMPLING_DEFAULTS=api); unlisted: SamplingParams'.
API_DEFAULTS: dict[str, Any] = {"temperature": 0.7}


def _logprobs(tokens: Sequence[GeneratedToken]) -> list[dict[str, Any]]:
    out = []
    for t in tokens:
        chosen = t.logprob
        if chosen is None:
            continue
        top = [{"token": a.token, "logprob": a.logprob} for a in t.top_logprobs]
        out.append({"token": chosen.token, "logprob": chosen.logprob, "top_logprobs": top})
    return out


async def _named(work: Coroutine[Any, Any, T], names: Mapping[str, str]) -> T:
    """``work``'s result; the core's errors in it name this door's options (``names``)."""
    try:
        return await work
    except GenAIError as exc:
        raise exc.renamed(lambda field: names.get(field, field)) from None


class OnnxTextGenerator:
    """Load a model folder once; ``generate`` / ``stream_generate`` on it; ``close()`` at the end.

    ``settings`` are the server's settings by field name (``device``, ``max_length``,
    ``default_max_tokens``, ``intra_op_threads``, ...), validated the same way; unset ones come
    from the environment / ``.env`` like the server's.
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        load_timeout: float = 300.0,
        **settings: Any,
    ) -> None:
        if model_dir is not None:
            settings["model_dir"] = Path(model_dir)
        self.settings = Settings.load(**settings)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="genai-text-generator", daemon=True
        )
        self._thread.start()
        self._closed = False
        config = service_config(model_fields(self.settings.model), self.settings.server.limits())
        self.service = make_service(config)  # a generator, or an encoder (embed / rerank)
        try:
            self._call(self.service.start(), timeout=load_timeout)
        except BaseException:
            self.close()
            raise

    # ---- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the model's thread and the loop; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self.service.stop(), timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop.close()

    def __enter__(self) -> OnnxTextGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def model_name(self) -> str:
        return self.service.model_name

    # ---- generation ------------------------------------------------------------------------
    def generate(self, prompt: Prompt, **options: Any) -> dict[str, Any]:
        """Generate to the end. Options as for :meth:`stream_generate`.

        Returns ``{"generated_text", "tokens_generated", "finish_reason", "metrics"}`` for the
        first choice (the original shape), plus ``usage`` (all choices) and ``choices``: each
        with ``index``, ``text``, ``finish_reason``, ``tokens_generated`` and ``logprobs``.
        """
        request = self._request(prompt, **options)
        result = self._call(self._result(request))
        metrics = {**result.metrics.as_dict(), "model": self.model_name}
        choices = [self._choice(c, request.sampling.logprobs) for c in result.choices]
        first = choices[0]
        return {
            "generated_text": first["text"],
            "tokens_generated": first["tokens_generated"],
            "finish_reason": first["finish_reason"],
            "metrics": metrics,
            "usage": {
                "prompt_tokens": result.usage.prompt_tokens,
                "completion_tokens": result.usage.completion_tokens,
                "cached_tokens": result.usage.cached_tokens,
                **(
                    {
                        "drafted_tokens": result.usage.drafted_tokens,
                        "accepted_tokens": result.usage.accepted_tokens,
                    }
                    if result.usage.drafted_tokens
                    else {}
                ),
            },
            "choices": choices,
        }

    def stream_generate(
        self, prompt: Prompt, **options: Any
    ) -> Generator[tuple[str, dict[str, Any]], None, None]:
        """Yield ``(text, metadata)`` per generated token, then one last item per choice.

        ``prompt``: raw text (continued as is, like /generate) or a list of chat messages
        (rendered with the model's chat template, like /v1/chat). Options: ``max_new_tokens``,
        ``temperature`` (0 is greedy), ``stop`` (strings), ``n``, ``logprobs``,
        ``top_logprobs``, ``json_schema`` (a dict; the output is JSON matching it), and the
        other sampling parameters by name (``top_p``, ``top_k``, ``min_p``, ``seed``,
        ``min_new_tokens``, ``repetition_penalty``, ``presence_penalty``,
        ``frequency_penalty``, ``logit_bias``), and ``speculative`` (n-gram speculation, in
        vLLM's shape: ``{"method": "ngram", "num_speculative_tokens": 8}``). Temperature,
        top_p, top_k and the repetition penalty left out are the model's own defaults
        (GENAI_SAMPLING_DEFAULTS=api: temperature 0.7, no cuts, no penalty).

        Per token: ``{"choice", "index", "token_id", "finish_reason": None}`` (with
        ``logprobs``: also ``logprob`` and ``top_logprobs``); ``text`` may be empty (a partial
        character, or text held back because it could start a stop string). A choice's last
        item has its ``finish_reason`` (``stop`` or ``length``), ``tokens_generated`` and
        ``metrics``. Leaving the loop early cancels the generation. A request the server
        ends raises: RequestTimedOut (GENAI_REQUEST_TIMEOUT), RequestCancelled (an
        operator's cancel), ShuttingDown.
        """
        request = self._request(prompt, **options)
        handle = self._call(self._submit(request))
        out: queue.SimpleQueue[Any] = queue.SimpleQueue()
        asyncio.run_coroutine_threadsafe(self._pump(handle, out), self._loop)
        try:
            while (item := out.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            handle.cancel()

    # ---- helpers -----------------------------------------------------------------------------
    def _request(
        self,
        prompt: Prompt,
        *,
        max_new_tokens: int | None = None,
        stop: Sequence[str] = (),
        n: int = 1,
        json_schema: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> GenerationRequest:
        guidance = json_schema_guidance(json_schema) if json_schema is not None else None
        asked = options.get("speculative")
        if isinstance(asked, Mapping):  # vLLM's shape, as the HTTP doors take it
            if asked.get("method", "ngram") != "ngram":
                raise ValueError("speculative: only method 'ngram' is available")
            options["speculative"] = Speculative(
                asked.get("num_speculative_tokens"),
                asked.get("prompt_lookup_min"),
                asked.get("prompt_lookup_max"),
            )
        # None, like an option left out, is the model's default (this door's own under api).
        sampling = {k: v for k, v in options.items() if v is not None or k not in DEFAULTED_FIELDS}
        params = SamplingParams(**{**API_DEFAULTS, **sampling}, guidance=guidance)
        core_prompt = TextPrompt(prompt) if isinstance(prompt, str) else ChatPrompt(prompt)
        return GenerationRequest(
            core_prompt,
            params,
            unset=DEFAULTED_FIELDS - sampling.keys(),
            max_tokens=max_new_tokens,
            stop=[stop] if isinstance(stop, str) else list(stop),
            n=n,
        )

    @staticmethod
    def _choice(c: ChoiceResult, logprobs: bool) -> dict[str, Any]:
        return {
            "index": c.index,
            "text": c.text,
            "finish_reason": c.finish_reason,
            "tokens_generated": c.completion_tokens,
            "logprobs": _logprobs(c.tokens) if logprobs else None,
        }

    # ---- encoders ------------------------------------------------------------------------
    def embed(
        self,
        texts: str | Sequence[str],
        *,
        dimensions: int | None = None,
        prompt_name: str | None = None,
        input_type: str | None = None,
        truncate: bool = False,
    ) -> list[list[float]]:
        """One vector per text, from an embedding model, as /v1/embeddings computes it."""
        request = EmbedRequest(
            [texts] if isinstance(texts, str) else list(texts),
            prompt_name=prompt_name,
            input_type=input_type,
            dimensions=dimensions,
            truncate=-1 if truncate else None,
        )
        result = self._call(_named(self._encoder("embedding").embed(request), _EMBED))
        return [v.tolist() for v in result.vectors]

    def rerank(
        self, query: str, documents: Sequence[str], *, top_n: int | None = None
    ) -> list[dict[str, Any]]:
        """``{"index", "relevance_score"}`` per document, best first, from a reranker."""
        scoring = self._encoder("reranker").score([(query, d) for d in documents])
        scored = self._call(_named(scoring, _RERANK))
        order = sorted(range(len(documents)), key=lambda i: -scored.scores[i])[:top_n]
        return [{"index": i, "relevance_score": scored.scores[i]} for i in order]

    def _encoder(self, kind: str) -> EncoderService:
        if not isinstance(self.service, EncoderService):
            self.service._wrong_kind(kind)
        return self.service

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if self._closed and self._loop.is_closed():
            coro.close()
            raise RuntimeError("this OnnxTextGenerator is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _submit(self, request: GenerationRequest) -> RequestHandle:
        """Submit ``request``; its errors name this door's options (``max_new_tokens``)."""
        return await _named(self.service.submit(request), _OPTIONS)

    async def _result(self, request: GenerationRequest) -> Result:
        handle = await self._submit(request)
        return await handle.result()

    async def _pump(self, handle: RequestHandle, out: queue.SimpleQueue[Any]) -> None:
        counts = {c.index: 0 for c in handle.choices}
        held = {c.index: "" for c in handle.choices}  # text released without a token
        try:
            async for piece in handle:
                i = piece.index
                meta: dict[str, Any]
                if piece.finish_reason is not None:
                    meta = {
                        "choice": i,
                        "index": counts[i],
                        "finish_reason": piece.finish_reason,
                        "tokens_generated": counts[i],
                        "metrics": {**handle.metrics().as_dict(), "model": handle.model},
                    }
                    out.put((held[i] + piece.text, meta))
                elif piece.token is None:
                    held[i] += piece.text
                else:
                    meta = {
                        "choice": i,
                        "index": counts[i],
                        "token_id": piece.token.token_id,
                        "finish_reason": None,
                    }
                    if piece.token.logprob is not None:
                        [entry] = _logprobs([piece.token])
                        meta.update(logprob=entry["logprob"], top_logprobs=entry["top_logprobs"])
                    counts[i] += 1
                    out.put((piece.text, meta))
        except Exception as exc:
            out.put(exc)
        finally:
            out.put(_END)
