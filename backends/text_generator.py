"""In-process text generation, without HTTP: the seed's ``OnnxTextGenerator``.

    with OnnxTextGenerator(model_dir="models/demo-llama") as gen:
        print(gen.generate("Once upon a time", max_new_tokens=32)["generated_text"])
        for chunk, meta in gen.stream_generate([{"role": "user", "content": "Hi"}]):
            print(chunk, end="", flush=True)

It drives the same :class:`InferenceService` as the server (same owner thread, scheduler and
settings) from an asyncio loop running in a background thread, so it can be called from plain
synchronous code, from several threads at once.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Coroutine, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from backends.errors import GenerationFailed, RequestTimedOut
from backends.service import Generation, InferenceService
from backends.stops import StopMatcher
from backends.types import PreparedPrompt
from metrics.timing import RequestTimer

T = TypeVar("T")
Prompt = str | Sequence[Mapping[str, str]]  # raw text, or chat messages for the chat template

_END = object()


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
        # The server's own settings and mapping to the service config (one source of truth).
        from schemas.settings import Settings

        if model_dir is not None:
            settings["model_dir"] = Path(model_dir)
        self.settings = Settings(**settings)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="genai-text-generator", daemon=True
        )
        self._thread.start()
        self._closed = False
        config = self.settings.service_config()
        self.service = InferenceService(config)
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
        return self.service.config.model_name

    # ---- generation ------------------------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        *,
        max_new_tokens: int | None = None,
        temperature: float = 0.7,
        stop: Sequence[str] = (),
        **sampling: Any,
    ) -> dict[str, Any]:
        """``{"generated_text", "tokens_generated", "finish_reason", "metrics"}``.

        ``prompt``: raw text (continued as is, like /generate) or a list of chat messages
        (rendered with the model's chat template, like /v1/chat). ``sampling``: more
        GenerationParams fields (``top_p``, ``top_k``, ``seed``, ``repetition_penalty``, ...).
        """
        pieces: list[str] = []
        last: dict[str, Any] = {}
        for chunk, meta in self.stream_generate(
            prompt, max_new_tokens=max_new_tokens, temperature=temperature, stop=stop, **sampling
        ):
            pieces.append(chunk)
            last = meta
        return {
            "generated_text": "".join(pieces),
            "tokens_generated": last["tokens_generated"],
            "finish_reason": last["finish_reason"],
            "metrics": last["metrics"],
        }

    def stream_generate(
        self,
        prompt: Prompt,
        *,
        max_new_tokens: int | None = None,
        temperature: float = 0.7,
        stop: Sequence[str] = (),
        **sampling: Any,
    ) -> Generator[tuple[str, dict[str, Any]], None, None]:
        """Yield ``(text, metadata)`` per generated token, then one last ``(text, metadata)``.

        Per token: ``{"index", "token_id", "finish_reason": None}``; ``text`` may be empty (a
        partial character, or text held back because it could start a stop string). The last
        item has ``finish_reason`` (``"stop"`` | ``"length"``), ``tokens_generated`` and
        ``metrics``. Leaving the loop early cancels the generation.
        """
        gen = self._call(self._start(prompt, max_new_tokens, temperature, sampling))
        out: queue.SimpleQueue[Any] = queue.SimpleQueue()
        asyncio.run_coroutine_threadsafe(self._pump(gen, stop, out), self._loop)
        try:
            while (item := out.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            gen.cancel()

    # ---- on the loop -----------------------------------------------------------------------
    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if self._closed and self._loop.is_closed():
            coro.close()
            raise RuntimeError("this OnnxTextGenerator is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _start(
        self,
        prompt: Prompt,
        max_new_tokens: int | None,
        temperature: float,
        sampling: dict[str, Any],
    ) -> Generation:
        timer = RequestTimer()
        prepared = await self._prepare(prompt)
        params = self.service.plan(
            prepared, max_tokens=max_new_tokens, temperature=temperature, **sampling
        )
        return self.service.generate(prepared, params, timer)

    async def _prepare(self, prompt: Prompt) -> PreparedPrompt:
        if isinstance(prompt, str):
            return await self.service.prepare_text(prompt)
        return await self.service.prepare_chat([dict(m) for m in prompt])

    async def _pump(
        self, gen: Generation, stops: Sequence[str], out: queue.SimpleQueue[Any]
    ) -> None:
        matcher = StopMatcher(stops)
        index = 0
        try:
            async for event in gen:
                if matcher.matched is not None:
                    continue  # cancelled: drain until the scheduler confirms
                text = matcher.feed(event.text)
                if matcher.matched is not None:
                    gen.cancel()
                out.put((text, {"index": index, "token_id": event.token_id, "finish_reason": None}))
                index += 1
            finish = gen.finish
            assert finish is not None
            if finish.reason == "error":
                raise GenerationFailed(f"Generation failed: {finish.error}")
            if finish.reason == "timeout":
                raise RequestTimedOut("The request exceeded GENAI_REQUEST_TIMEOUT.")
            reason = (
                "stop" if matcher.matched is not None or finish.reason != "length" else "length"
            )
            metrics = {**gen.metrics().as_dict(), "model": self.model_name}
            meta = {
                "index": index,
                "finish_reason": reason,
                "tokens_generated": finish.usage.completion_tokens,
                "metrics": metrics,
            }
            out.put((matcher.flush(), meta))
        except Exception as exc:
            out.put(exc)
        finally:
            gen.cancel()
            out.put(_END)
