"""The project's own async load generator (httpx), for this server or any OpenAI-compatible one.

Four request protocols:
- ``native``: this server's ``/v1/chat`` (JSON) and ``/v1/chat/stream`` (SSE ``{"token": ...}``,
  then ``{"done": true, "metrics": {...}}``);
- ``openai``: ``/v1/chat/completions`` (works against llama-server, vLLM, ...), with
  ``stream_options.include_usage`` and ``min_tokens`` where the server accepts it;
- ``completions``: OpenAI ``/v1/completions`` with the prompt as token ids when the request has
  them (llama-server accepts ids: the peer then sees exactly the other arms' prompt tokens),
  else the last message's text; ``Client.extra`` adds server-specific fields (llama-server's
  ``ignore_eos``), and llama-server's ``timings`` become the result's server metrics;
- ``responses``: OpenAI ``/v1/responses``, the system message as ``instructions``; a request
  that names the response it continues (``RequestSpec.previous_response``) sends only the
  messages after the last answer, with ``previous_response_id``, as an agent on the Responses
  API does; the response's id comes back in the result.

Two arrival patterns: a fixed number of requests in flight (closed loop) and Poisson arrivals
at a given rate (open loop). Each request records client-side TTFT, the gaps between streamed
pieces (inter-token latency), end-to-end latency and output tokens. The client measures its
own CPU time too: on a 2-core machine it competes with the server it measures.
"""

from __future__ import annotations

import asyncio
import json
import random
import resource
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

try:
    from tqdm import tqdm
except ImportError:  # the smoke mode needs only httpx
    tqdm = None


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


def refuses_min_tokens(error: str | None) -> bool:
    """Whether the probe's failure is the server refusing its body (a 400 or 422: the body is
    valid but for ``min_tokens``), not one that says nothing about the field (a timeout, a 408,
    a 429 or a 5xx on a starved machine)."""
    return bool(error) and str(error).startswith(("HTTP 400", "HTTP 422"))


@dataclass
class Client:
    """One target server: base URL, protocol and what it accepts."""

    url: str
    protocol: str = "native"  # "native" | "openai" | "completions" | "responses"
    model: str | None = None
    min_tokens: bool = False  # send min_tokens = max_tokens (OpenAI protocol, if accepted)
    timeout: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)  # more body fields (OpenAI protocols)

    def _body(self, spec: RequestSpec, stream: bool) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "messages": spec.messages,
            "max_tokens": spec.max_tokens,
            "temperature": 0.0,
        }
        if self.protocol == "native":
            return ("/v1/chat/stream" if stream else "/v1/chat"), body
        if self.protocol == "responses":
            return "/v1/responses", self._responses_body(spec, stream)
        path = "/v1/chat/completions"
        if self.protocol == "completions":
            path = "/v1/completions"
            del body["messages"]
            body["prompt"] = (
                spec.prompt_ids if spec.prompt_ids is not None else spec.messages[-1]["content"]
            )
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return path, self._finish(body, spec)

    def _finish(self, body: dict[str, Any], spec: RequestSpec) -> dict[str, Any]:
        """The fields every OpenAI protocol adds: the model, ``min_tokens``, ``extra``."""
        if self.model:
            body["model"] = self.model
        if self.min_tokens:
            body["min_tokens"] = spec.max_tokens
        body.update(self.extra)
        return body

    def _responses_body(self, spec: RequestSpec, stream: bool) -> dict[str, Any]:
        messages = spec.messages
        if spec.previous_response is not None:  # the server holds the rest
            last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
            messages = messages[last + 1 :]
        system = [m["content"] for m in spec.messages if m["role"] == "system"]
        body: dict[str, Any] = {
            "input": [m for m in messages if m["role"] != "system"],
            "max_output_tokens": spec.max_tokens,
            "temperature": 0.0,
            "stream": stream,
        }
        if system:
            body["instructions"] = "\n".join(system)
        if spec.previous_response is not None:
            body["previous_response_id"] = spec.previous_response
        return self._finish(body, spec)

    async def probe(self, http: httpx.AsyncClient) -> dict[str, Any]:
        """Find the model name and whether ``min_tokens`` is accepted (OpenAI protocol)."""
        info: dict[str, Any] = {"protocol": self.protocol}
        if self.protocol == "native":
            return info
        if self.model is None:
            try:
                r = await http.get(self.url + "/v1/models")
                self.model = r.json()["data"][0]["id"]
            except Exception:  # a server without /v1/models
                self.model = None
        spec = RequestSpec([{"role": "user", "content": "hi"}], 2)
        self.min_tokens = self.protocol in ("openai", "responses")
        for _ in range(3):
            res = await self.request(http, spec, stream=False)
            if res.ok:
                break
            if self.min_tokens and refuses_min_tokens(res.error):
                self.min_tokens = False  # the server refused the field: go on without it
            # else ask again with the same fields, not fewer
        info.update(model=self.model, min_tokens=self.min_tokens, probe_ok=res.ok)
        if not res.ok:
            info["probe_error"] = res.error
        return info

    async def request(
        self, http: httpx.AsyncClient, spec: RequestSpec, *, stream: bool
    ) -> RequestResult:
        path, body = self._body(spec, stream)
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
                self._parse_json(r.json(), res)
                res.ok = True
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            res.error = f"{type(exc).__name__}: {exc}"
        return res

    def _parse_json(self, data: dict[str, Any], res: RequestResult) -> None:
        if self.protocol == "native":
            m = data["metrics"]
            res.server = m
            res.output_tokens = int(m["output_tokens"])
            res.prompt_tokens = int(m["input_tokens"])
            res.ttft = float(m["ttft"])  # not observable by a non-streaming client
        elif self.protocol == "responses":
            self._response(data, res)
            res.ttft = res.e2e
            texts = [c.get("text", "") for o in data["output"] for c in o.get("content") or ()]
            res.text = "".join(texts)
        else:
            usage = data.get("usage") or {}
            res.output_tokens = int(usage.get("completion_tokens", 0))
            res.prompt_tokens = int(usage.get("prompt_tokens", 0))
            res.finish_reason = data["choices"][0].get("finish_reason")
            choice = data["choices"][0]
            res.text = str(choice.get("text") or (choice.get("message") or {}).get("content") or "")
            res.cached_tokens = _cached(usage)
            res.ttft = res.e2e
            self._timings(data, res)

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
                text = self._piece(event, res)
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

    @staticmethod
    def _response(data: dict[str, Any], res: RequestResult) -> None:
        """A Responses API response object's id, usage and end."""
        usage = data.get("usage") or {}
        res.response_id = data.get("id")
        res.output_tokens = int(usage.get("output_tokens", 0))
        res.prompt_tokens = int(usage.get("input_tokens", 0))
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
        res.cached_tokens = int(cached) if cached is not None else None
        res.finish_reason = data.get("status")

    def _piece(self, event: dict[str, Any], res: RequestResult) -> str:
        if self.protocol == "responses":
            kind = event.get("type")
            if kind == "error":
                raise ValueError(f"error event: {json.dumps(event)[:200]}")
            if kind in ("response.completed", "response.incomplete"):
                self._response(event["response"], res)
            return str(event.get("delta") or "") if kind == "response.output_text.delta" else ""
        if self.protocol == "native":
            if event.get("done"):
                m = event["metrics"]
                res.server = m
                res.output_tokens = int(m["output_tokens"])
                res.prompt_tokens = int(m["input_tokens"])
                return ""
            return str(event.get("token", ""))
        if isinstance(event.get("metrics"), dict):  # this server's timing, on the last chunk
            res.server = event["metrics"]
        if event.get("usage"):
            res.output_tokens = int(event["usage"].get("completion_tokens", 0))
            res.prompt_tokens = int(event["usage"].get("prompt_tokens", 0))
            res.cached_tokens = _cached(event["usage"])
        self._timings(event, res)
        choices = event.get("choices") or []
        if not choices:
            return ""
        if choices[0].get("finish_reason"):
            res.finish_reason = choices[0]["finish_reason"]
        if self.protocol == "completions":
            return str(choices[0].get("text") or "")
        return str((choices[0].get("delta") or {}).get("content") or "")

    @staticmethod
    def _timings(data: dict[str, Any], res: RequestResult) -> None:
        """llama-server's own ``timings`` (prompt and decode), as this server's metric names."""
        t = data.get("timings")
        if isinstance(t, dict) and "prompt_ms" in t:
            res.server = {
                "ttft": float(t["prompt_ms"]) / 1e3,
                "tokens_per_second": float(t.get("predicted_per_second", float("nan"))),
                "timings": t,
            }


def _cached(usage: dict[str, Any]) -> int | None:
    """OpenAI's ``usage.prompt_tokens_details.cached_tokens`` (this server and llama-server
    both report it), or None."""
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    return int(cached) if cached is not None else None


def percentiles(values: list[float], ps: tuple[int, ...] = (50, 90, 99)) -> dict[str, float]:
    if not values:
        return {f"p{p}": float("nan") for p in ps} | {"mean": float("nan")}
    s = sorted(values)
    out = {}
    for p in ps:  # linear interpolation between closest ranks
        k = (len(s) - 1) * p / 100
        lo = int(k)
        hi = min(lo + 1, len(s) - 1)
        out[f"p{p}"] = s[lo] + (s[hi] - s[lo]) * (k - lo)
    out["mean"] = sum(s) / len(s)
    return out


@dataclass(frozen=True)
class SLO:
    ttft: float = 1.0  # seconds
    tpot: float = 0.1  # seconds per output token after the first

    def met(self, r: RequestResult) -> bool:
        return r.ok and r.ttft <= self.ttft and r.tpot <= self.tpot


def summarize(results: list[RequestResult], wall: float, cpu: float, slo: SLO) -> dict[str, Any]:
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    return {
        "requests": len(results),
        "ok": len(ok),
        "errors": sorted({r.error or "" for r in results if not r.ok})[:3],
        "wall_s": wall,
        "request_throughput": len(ok) / wall if wall else 0.0,
        "output_token_throughput": out_tokens / wall if wall else 0.0,
        "goodput": sum(slo.met(r) for r in ok) / wall if wall else 0.0,
        "slo": {"ttft_s": slo.ttft, "tpot_s": slo.tpot},
        "output_tokens": {
            "total": out_tokens,
            "min": min((r.output_tokens for r in ok), default=0),
            "max": max((r.output_tokens for r in ok), default=0),
        },
        "prompt_tokens": max((r.prompt_tokens for r in ok), default=0),
        "ttft": percentiles([r.ttft for r in ok]),
        "tpot": percentiles([r.tpot for r in ok if r.output_tokens > 1]),
        "itl": percentiles([g for r in ok for g in r.itl]),
        "e2e": percentiles([r.e2e for r in ok]),
        "client_cpu_s": cpu,
        "client_cpu_share": cpu / wall if wall else 0.0,
    }


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def run_load(
    client: Client,
    specs: list[RequestSpec],
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    stream: bool = True,
    seed: int = 0,
    slo: SLO = SLO(),
    desc: str = "",
    progress: bool = True,
) -> dict[str, Any]:
    """Send ``specs`` with ``concurrency`` in flight, or as Poisson arrivals at ``rate``/s."""
    limits = httpx.Limits(max_connections=max(64, concurrency or 0))
    bar = tqdm(total=len(specs), desc=desc, leave=False) if (tqdm and progress) else None
    results: list[RequestResult] = []

    async def one(http: httpx.AsyncClient, spec: RequestSpec) -> None:
        results.append(await client.request(http, spec, stream=stream))
        if bar is not None:
            bar.update(1)

    async with httpx.AsyncClient(limits=limits, timeout=client.timeout) as http:
        cpu0, t0 = _cpu(), time.perf_counter()
        if rate is None:
            queue: asyncio.Queue[RequestSpec] = asyncio.Queue()
            for s in specs:
                queue.put_nowait(s)

            async def worker() -> None:
                while not queue.empty():
                    await one(http, queue.get_nowait())

            await asyncio.gather(*(worker() for _ in range(concurrency or 1)))
        else:
            rng = random.Random(seed)
            tasks = []
            for s in specs:
                tasks.append(asyncio.create_task(one(http, s)))
                await asyncio.sleep(rng.expovariate(rate))
            await asyncio.gather(*tasks)
        wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    if bar is not None:
        bar.close()
    summary = summarize(results, wall, cpu, slo)
    summary.update(concurrency=concurrency, rate=rate, stream=stream)
    return summary
