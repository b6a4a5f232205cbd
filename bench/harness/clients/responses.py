"""OpenAI's Responses API (``responses``: ``/v1/responses``), the system message as
``instructions``. A request that names the response it continues
(:attr:`RequestSpec.previous_response`) sends only the messages after the last answer, with
``previous_response_id``, as an agent on the Responses API does; the response's id comes back
in the result."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from bench.harness.clients.base import RequestResult, RequestSpec
from bench.harness.clients.openai import OpenAIClient


class ResponsesClient(OpenAIClient):
    protocol: ClassVar[str] = "responses"

    def path(self, stream: bool) -> str:
        return "/v1/responses"

    def body(self, spec: RequestSpec, stream: bool) -> dict[str, Any]:
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
        return self.with_common_fields(body, spec)

    def read_answer(self, data: dict[str, Any], res: RequestResult) -> None:
        self._response(data, res)
        res.ttft = res.e2e
        texts = [c.get("text", "") for o in data["output"] for c in o.get("content") or ()]
        res.text = "".join(texts)

    def read_event(self, event: dict[str, Any], res: RequestResult) -> str:
        kind = event.get("type")
        if kind == "error":
            raise ValueError(f"error event: {json.dumps(event)[:200]}")
        if kind in ("response.completed", "response.incomplete"):
            self._response(event["response"], res)
        return str(event.get("delta") or "") if kind == "response.output_text.delta" else ""

    @staticmethod
    def _response(data: dict[str, Any], res: RequestResult) -> None:
        """A response object's id, usage and end."""
        usage = data.get("usage") or {}
        res.response_id = data.get("id")
        res.output_tokens = int(usage.get("output_tokens", 0))
        res.prompt_tokens = int(usage.get("input_tokens", 0))
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
        res.cached_tokens = int(cached) if cached is not None else None
        res.finish_reason = data.get("status")
