"""A tool call a grammar held that the output ended inside (issue 48), through every door that
takes tools, over a fake handle (no model): each door reports it in its own wire format, in
the ``failed_tool_calls`` extension, with its own token-limit finish, and never as text; a
stream says the same as the whole answer. The same readers run the demo model through the app
in tests/app/test_doors_failed_calls.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backends.chat.parsers import FailedCall
from tests.routes.door.test_answer import events
from tests.routes.fakes import FakeHandle, end, fake_app, said

pytestmark = pytest.mark.unit

REASON = "the call did not fit in the 20 tokens the request may generate"
FAILED = [{"name": "exec_command", "reason": REASON}]
CMD = {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}


@dataclass(frozen=True)
class Chat:
    """One conversation with tools, for every door: ``tools`` maps a name to its schema."""

    user: list[str] = field(default_factory=lambda: ["Run the command echo hello."])
    system: str | None = None
    tools: dict[str, dict[str, Any]] = field(default_factory=lambda: {"exec_command": CMD})
    limit: int | None = None  # the door's own max tokens field
    temperature: float = 0.0
    logit_bias: dict[str, float] | None = None  # where the door takes it (not Messages, Ollama)

    def messages(self) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, *({"role": "user", "content": u} for u in self.user)]


@dataclass(frozen=True)
class Said:
    """What a door answered: its text, its own finish word, ``failed_tool_calls`` (None when
    left out) and the calls, as (name, arguments)."""

    text: str
    finish: str
    failed: Any
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _stream(client: TestClient, path: str, body: dict[str, Any]) -> list[Any]:
    with client.stream("POST", path, json={**body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        raw = resp.read().decode()
    if path.startswith("/api/"):
        return [json.loads(line) for line in raw.splitlines() if line]
    return [data for _, data in events(raw) if data != "[DONE]"]


def _whole(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(path, json={**body, "stream": False})
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


def functions(chat: Chat) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": name, "parameters": schema}}
        for name, schema in chat.tools.items()
    ]


def openai(client: TestClient, chat: Chat, stream: bool) -> Said:
    body: dict[str, Any] = {"messages": chat.messages(), "tools": functions(chat)}
    body |= {"temperature": chat.temperature, "max_tokens": chat.limit}
    body |= {"logit_bias": chat.logit_bias} if chat.logit_bias else {}
    if not stream:
        [choice] = _whole(client, "/v1/chat/completions", body)["choices"]
        message = choice["message"]
        calls = [c["function"] for c in message["tool_calls"] or []]
        failed = choice.get("failed_tool_calls")
        text = message["content"] or ""
        finish = choice["finish_reason"]
    else:
        chunks = _stream(client, "/v1/chat/completions", body)
        choices = [c for chunk in chunks for c in chunk["choices"]]
        assert all("failed_tool_calls" not in c for c in choices[:-1])
        text = "".join(c["delta"].get("content") or "" for c in choices)
        by_index: dict[int, dict[str, str]] = {}
        for c in choices:
            for delta in c["delta"].get("tool_calls") or []:
                call = by_index.setdefault(delta["index"], {"name": "", "arguments": ""})
                call["name"] += delta["function"].get("name") or ""
                call["arguments"] += delta["function"].get("arguments") or ""
        calls = [by_index[i] for i in sorted(by_index)]
        failed = choices[-1].get("failed_tool_calls")
        finish = choices[-1]["finish_reason"]
    return Said(text, finish, failed, [(c["name"], json.loads(c["arguments"])) for c in calls])


def responses(client: TestClient, chat: Chat, stream: bool) -> Said:
    tools = [{"type": "function", "name": n, "parameters": s} for n, s in chat.tools.items()]
    body: dict[str, Any] = {"input": chat.messages(), "tools": tools}
    body |= {"temperature": chat.temperature, "max_output_tokens": chat.limit}
    body |= {"logit_bias": chat.logit_bias} if chat.logit_bias else {}
    if stream:
        sent = _stream(client, "/v1/responses", body)
        deltas = "".join(e["delta"] for e in sent if e["type"] == "response.output_text.delta")
        assert sent[-1]["type"] in ("response.incomplete", "response.completed")
        response = sent[-1]["response"]
    else:
        response = _whole(client, "/v1/responses", body)
    output = response["output"]
    assert {item["type"] for item in output} <= {"message", "function_call"}, output
    texts = [p["text"] for item in output if item["type"] == "message" for p in item["content"]]
    if stream:
        assert deltas == "".join(texts)
    if response["status"] == "incomplete":
        assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    calls = [
        (item["name"], json.loads(item["arguments"]))
        for item in output
        if item["type"] == "function_call"
    ]
    return Said("".join(texts), response["status"], response.get("failed_tool_calls"), calls)


def messages(client: TestClient, chat: Chat, stream: bool) -> Said:
    tools = [{"name": n, "input_schema": s} for n, s in chat.tools.items()]
    user = [{"role": "user", "content": u} for u in chat.user]
    body: dict[str, Any] = {"model": "onnx-genai", "messages": user, "tools": tools}
    body |= {"max_tokens": chat.limit or 200, "temperature": chat.temperature}
    if chat.system:
        body["system"] = chat.system
    if not stream:
        message = _whole(client, "/v1/messages", body)
        blocks = message["content"]
        finish, failed = message["stop_reason"], message.get("failed_tool_calls")
    else:
        sent = _stream(client, "/v1/messages", body)
        blocks = [e["content_block"] for e in sent if e["type"] == "content_block_start"]
        for e in sent:
            if e["type"] == "content_block_delta":
                block, delta = blocks[e["index"]], e["delta"]
                if delta["type"] == "text_delta":
                    block["text"] += delta["text"]
                else:
                    block["partial"] = block.get("partial", "") + delta["partial_json"]
        for block in blocks:
            if block["type"] == "tool_use":
                block["input"] = json.loads(block.pop("partial", "") or "{}")
        [delta] = [e for e in sent if e["type"] == "message_delta"]
        finish, failed = delta["delta"]["stop_reason"], delta.get("failed_tool_calls")
    assert {b["type"] for b in blocks} <= {"text", "tool_use"}, blocks
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    calls = [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    return Said(text, finish, failed, calls)


def ollama(client: TestClient, chat: Chat, stream: bool) -> Said:
    body: dict[str, Any] = {"model": "onnx-genai", "messages": chat.messages()}
    options: dict[str, Any] = {"temperature": chat.temperature}
    if chat.limit is not None:
        options["num_predict"] = chat.limit
    body |= {"tools": functions(chat), "options": options}
    lines = (
        [_whole(client, "/api/chat", body)] if not stream else _stream(client, "/api/chat", body)
    )
    assert all("failed_tool_calls" not in line for line in lines[:-1])
    text = "".join(line["message"]["content"] for line in lines)
    calls = [
        (c["function"]["name"], c["function"]["arguments"])
        for line in lines
        for c in line["message"].get("tool_calls") or []
    ]
    failed = lines[-1].get("failed_tool_calls")
    if failed is not None:  # Ollama leaves out what is empty: a name not read too
        failed = [{"name": None, **f} for f in failed]
    return Said(text, lines[-1]["done_reason"], failed, calls)


# Each door that takes tools: its reader, then its finish at the token limit and at a stop.
Reader = Callable[[TestClient, Chat, bool], Said]
DOORS: dict[str, tuple[Reader, str, str]] = {
    "chat.completions": (openai, "length", "stop"),
    "responses": (responses, "incomplete", "completed"),
    "messages": (messages, "max_tokens", "end_turn"),
    "ollama chat": (ollama, "length", "stop"),
}


def _cut(text: str = "Running it.") -> TestClient:
    failed = (FailedCall("exec_command", REASON),)
    return fake_app(
        FakeHandle([*([said(text)] if text else []), end("length", failed_calls=failed)])
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("door", DOORS)
def test_a_cut_call_is_reported_as_failed_never_as_text(door: str, stream: bool) -> None:
    read, at_limit, _ = DOORS[door]
    assert read(_cut(), Chat(), stream) == Said("Running it.", at_limit, FAILED)
    # Nothing but the cut call: no text at all (no empty message item, no empty block).
    assert read(_cut(""), Chat(), stream) == Said("", at_limit, FAILED)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("door", DOORS)
def test_an_answer_without_a_failed_call_has_no_such_field(door: str, stream: bool) -> None:
    read, _, stopped = DOORS[door]
    client = fake_app(FakeHandle([said("Hello"), said(" there."), end("stop")]))
    assert read(client, Chat(), stream) == Said("Hello there.", stopped, None)


def test_a_response_or_message_of_only_a_cut_call_has_no_output() -> None:
    asked: dict[str, Any] = {"input": "Run it."}
    asked["tools"] = [{"type": "function", "name": "exec_command"}]
    response = _whole(_cut(""), "/v1/responses", asked)
    assert (response["status"], response["output"]) == ("incomplete", [])
    sent = _stream(_cut(""), "/v1/responses", asked)
    assert not [e for e in sent if e["type"] == "response.output_item.added"]
    tool = {"name": "exec_command", "input_schema": CMD}
    body: dict[str, Any] = {"model": "onnx-genai", "max_tokens": 20, "tools": [tool]}
    body["messages"] = [{"role": "user", "content": "Run it."}]
    assert _whole(_cut(""), "/v1/messages", body)["content"] == []
