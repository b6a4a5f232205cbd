"""The Anthropic Messages API's tests share these: the tools, the requests, and reading a
message, its stream and its errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient

MODEL = "onnx-genai"
ASK = [{"role": "user", "content": "What is the weather in Paris for three days?"}]
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    },
}
TIME = {
    "name": "get_time",
    "input_schema": {
        "type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"],
        "additionalProperties": False,
    },
}
ONE_CALL = {"type": "any", "disable_parallel_tool_use": True}


def valid_input(name: str, args: dict[str, Any]) -> bool:
    if name == "get_weather":
        return (
            set(args) == {"city", "days"}
            and args["city"] in ("Paris", "Rome", "Oslo")
            and isinstance(args["days"], int)
            and 1 <= args["days"] <= 7
        )
    return name == "get_time" and set(args) == {"zone"} and args["zone"] in ("UTC", "CET")


def post(client: TestClient, **body: Any) -> dict[str, Any]:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 16, **body}
    resp = client.post("/v1/messages", json=body)
    assert resp.status_code == 200, resp.text
    message: dict[str, Any] = resp.json()
    return message


def sse(lines: Iterator[str]) -> list[tuple[str | None, dict[str, Any]]]:
    """(event name, data) of each event."""
    events, name, data = [], None, []
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            events.append((name, json.loads("\n".join(data))))
            name, data = None, []
    if data:
        events.append((name, json.loads("\n".join(data))))
    return events


def stream(client: TestClient, **body: Any) -> list[dict[str, Any]]:
    body = {"model": MODEL, "messages": ASK, "max_tokens": 16, **body, "stream": True}
    with client.stream("POST", "/v1/messages", json=body) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse(resp.iter_lines())
    for name, data in events:
        assert name == data["type"], "every event is named after its type, as Anthropic's are"
    return [data for _, data in events]


def fold(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed message, put together the way the SDK does it."""
    [start] = [e for e in events if e["type"] == "message_start"]
    message = dict(start["message"], content=[])
    partial: dict[int, str] = {}
    for e in events:
        if e["type"] == "content_block_start":
            assert e["index"] == len(message["content"])
            message["content"].append(dict(e["content_block"]))
        elif e["type"] == "content_block_delta":
            block, delta = message["content"][e["index"]], e["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            else:
                partial[e["index"]] = partial.get(e["index"], "") + delta["partial_json"]
        elif e["type"] == "content_block_stop" and e["index"] in partial:
            message["content"][e["index"]]["input"] = json.loads(partial[e["index"]])
        elif e["type"] == "message_delta":
            message.update(e["delta"])
            message["usage"] = {**message["usage"], **e["usage"]}
    return message


def text_of(message: dict[str, Any]) -> str:
    return "".join(b["text"] for b in message["content"] if b["type"] == "text")


def count(client: TestClient, **body: Any) -> int:
    body = {"model": MODEL, "messages": ASK, **body}
    resp = client.post("/v1/messages/count_tokens", json=body)
    assert resp.status_code == 200, resp.text
    assert set(resp.json()) == {"input_tokens"}
    n: int = resp.json()["input_tokens"]
    return n


def prompt_tokens(message: dict[str, Any]) -> int:
    usage = message["usage"]
    return int(usage["input_tokens"] + usage["cache_read_input_tokens"])


def assert_anthropic_error(resp: Any, status: int, kind: str, *fragments: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["type"] == "error" and set(body) <= {"type", "error", "request_id"}
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == kind
    message: str = body["error"]["message"]
    for fragment in fragments:
        assert fragment in message, message
    return message
