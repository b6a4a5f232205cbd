"""This server's native API: ``/v1/chat`` (JSON) and ``/v1/chat/stream`` (SSE
``{"token": ...}``, then ``{"done": true, "metrics": {...}}``). The server's own metrics come
back with every answer."""

from __future__ import annotations

from typing import Any, ClassVar

from bench.harness.clients.base import Client, RequestResult, RequestSpec


class NativeClient(Client):
    protocol: ClassVar[str] = "native"

    def path(self, stream: bool) -> str:
        return "/v1/chat/stream" if stream else "/v1/chat"

    def body(self, spec: RequestSpec, stream: bool) -> dict[str, Any]:
        return {"messages": spec.messages, "max_tokens": spec.max_tokens, "temperature": 0.0}

    def read_answer(self, data: dict[str, Any], res: RequestResult) -> None:
        self._metrics(data["metrics"], res)
        res.ttft = float(data["metrics"]["ttft"])  # not observable by a non-streaming client

    def read_event(self, event: dict[str, Any], res: RequestResult) -> str:
        if event.get("done"):
            self._metrics(event["metrics"], res)
            return ""
        return str(event.get("token", ""))

    @staticmethod
    def _metrics(m: dict[str, Any], res: RequestResult) -> None:
        res.server = m
        res.output_tokens = int(m["output_tokens"])
        res.prompt_tokens = int(m["input_tokens"])
