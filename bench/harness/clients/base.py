"""What every protocol's client shares: the request and its result, the non-streaming and the
SSE exchange, and the probe of what the server accepts.

A protocol's client says where a request goes (:meth:`Client.path`), what its body is
(:meth:`Client.body`), and how a whole answer (:meth:`Client.read_answer`) or one streamed
event (:meth:`Client.read_event`) fills the result. Each request records client-side TTFT, the
gaps between streamed pieces (inter-token latency), end-to-end latency and output tokens.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx


@dataclass
class RequestSpec:
    messages: list[dict[str, str]]
    max_tokens: int
    prompt_ids: list[int] | None = None  # the rendered prompt (``completions`` protocol)
    previous_response: str | None = None  # the response it continues (``responses`` protocol)


@dataclass
class RequestResult:
    ok: bool
    start: float = 0.0
    ttft: float = 0.0  # client-side: send → first content piece (streams) or server metric
    e2e: float = 0.0
    output_tokens: int = 0
    prompt_tokens: int = 0
    itl: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    server: dict[str, Any] | None = None  # the native API's own metrics, when given
    error: str | None = None
    text: str = ""  # the generated text (a conversation's next turn appends it)
    cached_tokens: int | None = None  # prompt tokens the server took from its cache, if said
    response_id: str | None = None  # the ``responses`` protocol's response id

    @property
    def tpot(self) -> float:
        if self.output_tokens < 2:
            return 0.0
        return (self.e2e - self.ttft) / (self.output_tokens - 1)


@dataclass
class Client:
    """One target server: base URL, and what it accepts. A subclass speaks one protocol."""

    protocol: ClassVar[str]
    url: str
    model: str | None = None
    min_tokens: bool = False  # send min_tokens = max_tokens (OpenAI protocols, if accepted)
    timeout: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)  # more body fields (OpenAI protocols)

    # ---- what a protocol says ----------------------------------------------------------------
    def path(self, stream: bool) -> str:
        raise NotImplementedError

    def body(self, spec: RequestSpec, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def read_answer(self, data: dict[str, Any], res: RequestResult) -> None:
        """Fill ``res`` from a whole (non-streamed) answer."""
        raise NotImplementedError

    def read_event(self, event: dict[str, Any], res: RequestResult) -> str:
        """Fill ``res`` from one streamed event; the text it adds."""
        raise NotImplementedError

    # ---- the exchange ------------------------------------------------------------------------
    async def probe(self, http: httpx.AsyncClient) -> dict[str, Any]:
        """What the server accepts (the OpenAI protocols: the model name, ``min_tokens``)."""
        return {"protocol": self.protocol}

    async def request(
        self, http: httpx.AsyncClient, spec: RequestSpec, *, stream: bool
    ) -> RequestResult:
        path, body = self.path(stream), self.body(spec, stream)
        t0 = time.perf_counter()
        res = RequestResult(ok=False, start=t0)
        try:
            if stream:
                await self._stream(http, path, body, res, t0)
            else:
                r = await http.post(self.url + path, json=body, timeout=self.timeout)
                res.e2e = time.perf_counter() - t0
                if r.status_code != 200:
                    res.error = f"HTTP {r.status_code}: {r.text[:200]}"
                    return res
                self.read_answer(r.json(), res)
                res.ok = True
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            res.error = f"{type(exc).__name__}: {exc}"
        return res

    async def _stream(
        self,
        http: httpx.AsyncClient,
        path: str,
        body: dict[str, Any],
        res: RequestResult,
        t0: float,
    ) -> None:
        last = 0.0
        pieces = 0
        async with http.stream("POST", self.url + path, json=body, timeout=self.timeout) as r:
            if r.status_code != 200:
                res.error = f"HTTP {r.status_code}: {(await r.aread())[:200]!r}"
                return
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                event = json.loads(payload)
                if "error" in event:
                    res.error = json.dumps(event["error"])[:200]
                    return
                now = time.perf_counter()
                text = self.read_event(event, res)
                if text:
                    res.text += text
                    if pieces == 0:
                        res.ttft = now - t0
                    else:
                        res.itl.append(now - last)
                    last = now
                    pieces += 1
        res.e2e = time.perf_counter() - t0
        if res.output_tokens == 0:  # no usage reported: count pieces
            res.output_tokens = pieces
        res.ok = True
