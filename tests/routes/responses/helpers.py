"""The Responses API's tests share these: the tools, creating a response and reading its stream
(each validated against the official openai package's models), and a fake handle for the
builder."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from openai.types.responses import Response as SDKResponse
from openai.types.responses import ResponseStreamEvent as SDKStreamEvent
from pydantic import TypeAdapter

from backends.core.timing import RequestMetrics
from backends.types import SamplingParams, Usage

ASK = "What is the weather in Paris for three days?"
EOS = 2  # the demo model's eos_token_id
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    },
    "strict": True,
}
TIME = {
    "type": "function",
    "name": "get_time",
    "parameters": {
        "type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"],
        "additionalProperties": False,
    },
}
SDK_EVENT: TypeAdapter[Any] = TypeAdapter(SDKStreamEvent)


def create(client: TestClient, **body: Any) -> dict[str, Any]:
    body.setdefault("input", ASK)
    resp = client.post("/v1/responses", json=body)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    SDKResponse.model_validate(out)  # as the official client reads it, fully validated
    return out


def stream(client: TestClient, **body: Any) -> list[dict[str, Any]]:
    """The events, checked for what every Responses stream must be."""
    body.setdefault("input", ASK)
    with client.stream("POST", "/v1/responses", json={**body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = list(resp.iter_lines())
    events, name = [], None
    for line in lines:
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            event = json.loads(line.removeprefix("data:"))
            assert event["type"] == name, "the event: line names the data's type"
            SDK_EVENT.validate_python(event)
            events.append(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert "[DONE]" not in "\n".join(lines)
    return events


def text_of(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


def calls_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "function_call"]


def chat(client: TestClient, **body: Any) -> dict[str, Any]:
    resp = client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def valid_weather(arguments: str) -> bool:
    args = json.loads(arguments)
    return (
        set(args) == {"city", "days"}
        and args["city"] in ("Paris", "Rome", "Oslo")
        and isinstance(args["days"], int)
        and 1 <= args["days"] <= 7
    )


class FakeHandle:
    model = "m"
    created = 1
    sampling = SamplingParams()

    def usage(self) -> Usage:
        return Usage(10, 7, 4)

    def metrics(self) -> RequestMetrics:
        return RequestMetrics(0.1, 0.2, 0.01, 100.0, 35.0, 10, 7)
