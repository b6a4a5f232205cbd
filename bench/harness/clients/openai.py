"""OpenAI's Chat Completions (``openai``: ``/v1/chat/completions``, works against llama-server,
vLLM, ...) and Completions (``completions``: ``/v1/completions``).

Streams ask for ``stream_options.include_usage``; ``min_tokens`` is sent where the probe found
the server accepts it; :attr:`Client.extra` adds server-specific fields (llama-server's
``ignore_eos``), and llama-server's ``timings`` become the result's server metrics.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from bench.harness.clients.base import Client, RequestResult, RequestSpec


def refuses_min_tokens(error: str | None) -> bool:
    """Whether the probe's failure is the server refusing its body (a 400 or 422: the body is
    valid but for ``min_tokens``), not one that says nothing about the field (a timeout, a 408,
    a 429 or a 5xx on a starved machine)."""
    return bool(error) and str(error).startswith(("HTTP 400", "HTTP 422"))


class OpenAIClient(Client):
    """What the OpenAI protocols share: the model name, ``min_tokens`` and ``extra`` in every
    body, and the probe that finds the first two."""

    takes_min_tokens: ClassVar[bool] = True  # whether the probe tries ``min_tokens`` first

    def with_common_fields(self, body: dict[str, Any], spec: RequestSpec) -> dict[str, Any]:
        if self.model:
            body["model"] = self.model
        if self.min_tokens:
            body["min_tokens"] = spec.max_tokens
        body.update(self.extra)
        return body

    async def probe(self, http: httpx.AsyncClient) -> dict[str, Any]:
        """Find the model name and whether ``min_tokens`` is accepted."""
        info: dict[str, Any] = {"protocol": self.protocol}
        if self.model is None:
            try:
                r = await http.get(self.url + "/v1/models")
                self.model = r.json()["data"][0]["id"]
            except Exception:  # a server without /v1/models
                self.model = None
        spec = RequestSpec([{"role": "user", "content": "hi"}], 2)
        self.min_tokens = self.takes_min_tokens
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


class ChatClient(OpenAIClient):
    protocol: ClassVar[str] = "openai"

    def path(self, stream: bool) -> str:
        return "/v1/chat/completions"

    def body(self, spec: RequestSpec, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": spec.messages}
        return self._sampling(body, spec, stream)

    def _sampling(self, body: dict[str, Any], spec: RequestSpec, stream: bool) -> dict[str, Any]:
        body.update(max_tokens=spec.max_tokens, temperature=0.0)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return self.with_common_fields(body, spec)

    def read_answer(self, data: dict[str, Any], res: RequestResult) -> None:
        usage = data.get("usage") or {}
        res.output_tokens = int(usage.get("completion_tokens", 0))
        res.prompt_tokens = int(usage.get("prompt_tokens", 0))
        res.finish_reason = data["choices"][0].get("finish_reason")
        choice = data["choices"][0]
        res.text = str(choice.get("text") or (choice.get("message") or {}).get("content") or "")
        res.cached_tokens = cached(usage)
        res.ttft = res.e2e
        timings(data, res)

    def read_event(self, event: dict[str, Any], res: RequestResult) -> str:
        if isinstance(event.get("metrics"), dict):  # this server's timing, on the last chunk
            res.server = event["metrics"]
        if event.get("usage"):
            res.output_tokens = int(event["usage"].get("completion_tokens", 0))
            res.prompt_tokens = int(event["usage"].get("prompt_tokens", 0))
            res.cached_tokens = cached(event["usage"])
        timings(event, res)
        choices = event.get("choices") or []
        if not choices:
            return ""
        if choices[0].get("finish_reason"):
            res.finish_reason = choices[0]["finish_reason"]
        return self.text_of(choices[0])

    def text_of(self, choice: dict[str, Any]) -> str:
        return str((choice.get("delta") or {}).get("content") or "")


class CompletionsClient(ChatClient):
    """The prompt as token ids when the request has them (llama-server accepts ids: the peer
    then sees exactly the other arms' prompt tokens), else the last message's text."""

    protocol: ClassVar[str] = "completions"
    takes_min_tokens: ClassVar[bool] = False

    def path(self, stream: bool) -> str:
        return "/v1/completions"

    def body(self, spec: RequestSpec, stream: bool) -> dict[str, Any]:
        prompt = spec.prompt_ids if spec.prompt_ids is not None else spec.messages[-1]["content"]
        return self._sampling({"prompt": prompt}, spec, stream)

    def text_of(self, choice: dict[str, Any]) -> str:
        return str(choice.get("text") or "")


def cached(usage: dict[str, Any]) -> int | None:
    """OpenAI's ``usage.prompt_tokens_details.cached_tokens`` (this server and llama-server
    both report it), or None."""
    details = usage.get("prompt_tokens_details") or {}
    n = details.get("cached_tokens")
    return int(n) if n is not None else None


def timings(data: dict[str, Any], res: RequestResult) -> None:
    """llama-server's own ``timings`` (prompt and decode), as this server's metric names."""
    t = data.get("timings")
    if isinstance(t, dict) and "prompt_ms" in t:
        res.server = {
            "ttft": float(t["prompt_ms"]) / 1e3,
            "tokens_per_second": float(t.get("predicted_per_second", float("nan"))),
            "timings": t,
        }
