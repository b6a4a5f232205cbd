"""One core, every door: the same greedy request through the eight doors (the native API's
/v1/chat and its stream, /generate, OpenAI's chat completions and completions, the Responses
API, Anthropic's Messages and Ollama's /api/chat and /api/generate, each streamed and not, and
the in-process OnnxTextGenerator)
gives the same text, the same finish reason and the same token counts at max_tokens, at a stop
string and at EOS; and on a timeout every door says so the same way (an error: the status, an
in-band event, an exception), never a normal finish. Forced tool calls through every door that
takes tools: test_doors_forced_calls.py.

Text doors (/generate, /v1/completions, /api/generate with ``raw``, OnnxTextGenerator with a
string) get the chat prompt already rendered, so every door continues the very same tokens.
Anthropic's Messages has no ``min_tokens`` or ``logit_bias``, Ollama's API no ``logit_bias``:
a request that needs them goes through every other door.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backends.errors import GenAIError
from config.settings import DEMO_MODEL_DIR
from in_process import OnnxTextGenerator
from tests.conftest import DirectGenerator, make_client, parse_sse, wait_ready

pytestmark = pytest.mark.model

MESSAGES = [{"role": "user", "content": "Name three rivers and a mountain."}]
ENDS_BY_ITSELF = [{"role": "user", "content": "Name a wind."}]  # the oracle checks it ends
EOS = 2  # the demo model's eos_token_id


@dataclass(frozen=True)
class Outcome:
    text: str | None  # an error: what a stream showed before it (None: not a stream)
    finish: str | None  # None: the door has no finish reason; "error:<code>" for an error
    tokens: int | None  # None: the door does not say


def http_error(resp: Any) -> Outcome:
    code = resp.json()["error"]["code"]
    assert (resp.status_code, code) == (504, "request_timeout"), resp.text
    return Outcome(None, f"error:{code}", None)


def stream_error(shown: str, event: dict[str, Any]) -> Outcome:
    return Outcome(shown, f"error:{event['error']['code']}", None)


@dataclass
class Doors:
    client: TestClient
    generator: OnnxTextGenerator
    prompt_text: str  # ``messages`` through the chat template
    messages: list[dict[str, str]]


Door = Callable[[Doors, dict[str, Any]], Outcome]


def _sse(client: TestClient, path: str, body: dict[str, Any]) -> list[Any]:
    with client.stream("POST", path, json=body) as resp:
        assert resp.status_code == 200, resp.read()
        return [json.loads(p) for p in parse_sse(resp.iter_lines()) if p != "[DONE]"]


def native_chat(d: Doors, req: dict[str, Any]) -> Outcome:
    resp = d.client.post("/v1/chat", json={"messages": d.messages, **req})
    if resp.status_code != 200:
        return http_error(resp)
    return Outcome(resp.json()["content"], None, resp.json()["metrics"]["output_tokens"])


def native_stream(d: Doors, req: dict[str, Any]) -> Outcome:
    *tokens, last = _sse(d.client, "/v1/chat/stream", {"messages": d.messages, **req})
    shown = "".join(t["token"] for t in tokens)
    if "error" in last:
        return stream_error(shown, last)
    assert last["done"] is True
    return Outcome(shown, None, last["metrics"]["output_tokens"])


def openai_chat(d: Doors, req: dict[str, Any]) -> Outcome:
    resp = d.client.post("/v1/chat/completions", json={"messages": d.messages, **req})
    if resp.status_code != 200:
        return http_error(resp)
    body = resp.json()
    [choice] = body["choices"]
    return Outcome(
        choice["message"]["content"], choice["finish_reason"], body["usage"]["completion_tokens"]
    )


def openai_chat_stream(d: Doors, req: dict[str, Any]) -> Outcome:
    body = {
        "messages": d.messages,
        **req,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks = _sse(d.client, "/v1/chat/completions", body)
    parts = [c for c in chunks if c.get("choices")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in parts)
    if "error" in chunks[-1]:
        return stream_error(text, chunks[-1])
    finish = parts[-1]["choices"][0]["finish_reason"]
    return Outcome(text, finish, chunks[-1]["usage"]["completion_tokens"])


def openai_completion(d: Doors, req: dict[str, Any]) -> Outcome:
    resp = d.client.post("/v1/completions", json={"prompt": d.prompt_text, **req})
    if resp.status_code != 200:
        return http_error(resp)
    [choice] = resp.json()["choices"]
    return Outcome(
        choice["text"], choice["finish_reason"], resp.json()["usage"]["completion_tokens"]
    )


def openai_completion_stream(d: Doors, req: dict[str, Any]) -> Outcome:
    body = {
        "prompt": d.prompt_text,
        **req,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks = _sse(d.client, "/v1/completions", body)
    parts = [c for c in chunks if c.get("choices")]
    text = "".join(c["choices"][0]["text"] for c in parts)
    if "error" in chunks[-1]:
        return stream_error(text, chunks[-1])
    finish = parts[-1]["choices"][0]["finish_reason"]
    return Outcome(text, finish, chunks[-1]["usage"]["completion_tokens"])


def generate_route(d: Doors, req: dict[str, Any]) -> Outcome:
    body = {"prompt": d.prompt_text, **req}
    body["max_new_tokens"] = body.pop("max_tokens")
    resp = d.client.post("/generate", json=body)
    if resp.status_code != 200:
        return http_error(resp)
    out = resp.json()
    return Outcome(out["generated_text"], out["finish_reason"], out["tokens_generated"])


def _in_process_options(req: dict[str, Any]) -> dict[str, Any]:
    options = dict(req)
    options["max_new_tokens"] = options.pop("max_tokens")
    if "min_tokens" in options:
        options["min_new_tokens"] = options.pop("min_tokens")
    if "logit_bias" in options:
        options["logit_bias"] = {int(k): v for k, v in options["logit_bias"].items()}
    return options


def in_process_chat(d: Doors, req: dict[str, Any]) -> Outcome:
    try:
        out = d.generator.generate(d.messages, **_in_process_options(req))
    except GenAIError as exc:
        return Outcome(None, f"error:{exc.code}", None)
    return Outcome(out["generated_text"], out["finish_reason"], out["tokens_generated"])


def in_process_text(d: Doors, req: dict[str, Any]) -> Outcome:
    try:
        out = d.generator.generate(d.prompt_text, **_in_process_options(req))
    except GenAIError as exc:
        return Outcome(None, f"error:{exc.code}", None)
    return Outcome(out["generated_text"], out["finish_reason"], out["tokens_generated"])


def in_process_stream(d: Doors, req: dict[str, Any]) -> Outcome:
    items: list[tuple[str, dict[str, Any]]] = []
    try:
        for item in d.generator.stream_generate(d.messages, **_in_process_options(req)):
            items.append(item)
    except GenAIError as exc:
        return Outcome("".join(t for t, _ in items), f"error:{exc.code}", None)
    *tokens, (tail, last) = items
    return Outcome(
        "".join(t for t, _ in tokens) + tail, last["finish_reason"], last["tokens_generated"]
    )


def _responses_body(d: Doors, req: dict[str, Any]) -> dict[str, Any]:
    body = {"input": d.messages, **req}
    body["max_output_tokens"] = body.pop("max_tokens")
    return body


RESPONSES_FINISH = {"completed": "stop", "incomplete": "length"}


def responses(d: Doors, req: dict[str, Any]) -> Outcome:
    resp = d.client.post("/v1/responses", json=_responses_body(d, req))
    if resp.status_code != 200:
        return http_error(resp)
    body = resp.json()
    [message] = body["output"]
    text = "".join(part["text"] for part in message["content"])
    return Outcome(text, RESPONSES_FINISH[body["status"]], body["usage"]["output_tokens"])


def responses_stream(d: Doors, req: dict[str, Any]) -> Outcome:
    events = _sse(d.client, "/v1/responses", {**_responses_body(d, req), "stream": True})
    shown = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    last = events[-1]
    if last["type"] == "error":
        return Outcome(shown, f"error:{last['code']}", None)
    response = last["response"]
    return Outcome(shown, RESPONSES_FINISH[response["status"]], response["usage"]["output_tokens"])


ANTHROPIC_LACKS = {"min_tokens", "logit_bias"}  # no such fields in Anthropic's Messages
ANTHROPIC_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}
ANTHROPIC_ERRORS = {"timeout_error": "request_timeout"}  # its errors have a type, no code


def _messages_body(d: Doors, req: dict[str, Any]) -> dict[str, Any]:
    body = {"model": "onnx-genai", "messages": d.messages, **req}
    if "stop" in body:
        body["stop_sequences"] = body.pop("stop")
    return body


def anthropic_messages(d: Doors, req: dict[str, Any]) -> Outcome:
    resp = d.client.post("/v1/messages", json=_messages_body(d, req))
    if resp.status_code != 200:
        kind = resp.json()["error"]["type"]
        assert (resp.status_code, kind) == (504, "timeout_error"), resp.text
        return Outcome(None, f"error:{ANTHROPIC_ERRORS[kind]}", None)
    message = resp.json()
    text = "".join(block["text"] for block in message["content"] if block["type"] == "text")
    finish = ANTHROPIC_FINISH[message["stop_reason"]]
    return Outcome(text, finish, message["usage"]["output_tokens"])


def anthropic_messages_stream(d: Doors, req: dict[str, Any]) -> Outcome:
    events = _sse(d.client, "/v1/messages", {**_messages_body(d, req), "stream": True})
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    shown = "".join(delta["text"] for delta in deltas if delta["type"] == "text_delta")
    if events[-1]["type"] == "error":
        return Outcome(shown, f"error:{ANTHROPIC_ERRORS[events[-1]['error']['type']]}", None)
    [end] = [e for e in events if e["type"] == "message_delta"]
    finish = ANTHROPIC_FINISH[end["delta"]["stop_reason"]]
    return Outcome(shown, finish, end["usage"]["output_tokens"])


OLLAMA_LACKS = {"logit_bias"}  # no such option in Ollama's API (min_tokens is our extension)


def _ollama_body(d: Doors, req: dict[str, Any], path: str, stream: bool) -> dict[str, Any]:
    options = {k: v for k, v in req.items() if k not in ("max_tokens", "logit_bias")}
    options["num_predict"] = req["max_tokens"]
    said = {"messages": d.messages} if path == "/api/chat" else {"prompt": d.prompt_text}
    raw = {"raw": True} if path == "/api/generate" else {}
    return {"model": "onnx-genai", **said, **raw, "options": options, "stream": stream}


def _ollama_error(message: str) -> str:
    # Ollama's errors carry a message only.
    return "error:request_timeout" if "GENAI_REQUEST_TIMEOUT" in message else f"error:{message}"


def _ollama_text(line: dict[str, Any]) -> str:
    return str(line["message"]["content"] if "message" in line else line["response"])


def ollama(path: str) -> Door:
    def whole(d: Doors, req: dict[str, Any]) -> Outcome:
        resp = d.client.post(path, json=_ollama_body(d, req, path, stream=False))
        if resp.status_code != 200:
            assert resp.status_code == 504 and set(resp.json()) == {"error"}, resp.text
            return Outcome(None, _ollama_error(resp.json()["error"]), None)
        body = resp.json()
        return Outcome(_ollama_text(body), body["done_reason"], body["eval_count"])

    return whole


def ollama_stream(path: str) -> Door:
    def stream(d: Doors, req: dict[str, Any]) -> Outcome:
        with d.client.stream("POST", path, json=_ollama_body(d, req, path, True)) as resp:
            assert resp.status_code == 200, resp.read()
            lines = [json.loads(line) for line in resp.iter_lines() if line]
        *parts, last = lines
        shown = "".join(_ollama_text(p) for p in parts)
        if "error" in last:
            return Outcome(shown, _ollama_error(last["error"]), None)
        assert last["done"] is True and not any(p["done"] for p in parts)
        return Outcome(shown + _ollama_text(last), last["done_reason"], last["eval_count"])

    return stream


DOORS: dict[str, Door] = {
    "/v1/chat": native_chat,
    "/v1/chat/stream": native_stream,
    "chat.completions": openai_chat,
    "chat.completions stream": openai_chat_stream,
    "completions": openai_completion,
    "completions stream": openai_completion_stream,
    "/generate": generate_route,
    "responses": responses,
    "responses stream": responses_stream,
    "messages": anthropic_messages,
    "messages stream": anthropic_messages_stream,
    "/api/chat": ollama("/api/chat"),
    "/api/chat stream": ollama_stream("/api/chat"),
    "/api/generate": ollama("/api/generate"),
    "/api/generate stream": ollama_stream("/api/generate"),
    "OnnxTextGenerator chat": in_process_chat,
    "OnnxTextGenerator text": in_process_text,
    "OnnxTextGenerator stream": in_process_stream,
}


NATIVE = ("/v1/chat", "/v1/chat/stream")  # no finish reason, no cut text
ANTHROPIC = ("messages", "messages stream")
OLLAMA = ("/api/chat", "/api/chat stream", "/api/generate", "/api/generate stream")


@contextmanager
def open_doors(oracle: DirectGenerator, **settings: Any) -> Iterator[Doors]:
    with make_client(**settings) as client:
        wait_ready(client)
        with OnnxTextGenerator(model_dir=DEMO_MODEL_DIR, **settings) as generator:
            yield Doors(client, generator, oracle.chat_prompt(MESSAGES), MESSAGES)


@pytest.fixture(scope="module")
def doors(oracle: DirectGenerator) -> Iterator[Doors]:
    with open_doors(oracle) as d:
        yield d


def through_every_door(d: Doors, req: dict[str, Any]) -> dict[str, Outcome]:
    """Each door's outcome; Anthropic's and Ollama's doors only where they can say the
    request."""
    unsaid = (*(ANTHROPIC if ANTHROPIC_LACKS & req.keys() else ()),)
    unsaid += OLLAMA if OLLAMA_LACKS & req.keys() else ()
    return {name: door(d, req) for name, door in DOORS.items() if name not in unsaid}


def assert_agree(outcomes: dict[str, Outcome], expected: Outcome) -> None:
    for name, got in outcomes.items():
        if name in NATIVE:
            assert got == Outcome(expected.text, None, expected.tokens), name
        else:
            assert got == expected, name


def assert_all_timed_out(outcomes: dict[str, Outcome], full: str) -> None:
    """Every door reports the timeout as an error; a stream showed a prefix of the answer."""
    for name, got in outcomes.items():
        assert got.finish == "error:request_timeout", name
        assert got.tokens is None, name
        assert got.text is None or full.startswith(got.text), name


def test_max_tokens_reached(doors: Doors, oracle: DirectGenerator) -> None:
    # A cap shorter than the demo model's answers: Anthropic's doors take no min_tokens.
    text, tokens = oracle.greedy(doors.prompt_text, 4)
    assert len(tokens) == 4, "the oracle stopped early; pick another prompt"
    outcomes = through_every_door(doors, {"temperature": 0, "max_tokens": 4})
    assert_agree(outcomes, Outcome(text, "length", 4))


def test_a_stop_string(doors: Doors, oracle: DirectGenerator) -> None:
    full, tokens = oracle.greedy(doors.prompt_text, 24)
    pieces = [oracle.tokenizer.decode([t]) for t in tokens]
    stop = next(p for p in pieces[4:] if len(p.strip()) >= 2 and "\ufffd" not in p)
    made = next(i + 1 for i in range(len(pieces)) if stop in "".join(pieces[: i + 1]))
    outcomes = through_every_door(doors, {"temperature": 0, "max_tokens": 24, "stop": [stop]})
    assert_agree(outcomes, Outcome(full[: full.find(stop)], "stop", made))


def test_eos_after_min_tokens(doors: Doors, oracle: DirectGenerator) -> None:
    text, _ = oracle.greedy(doors.prompt_text, 3)
    req = {"temperature": 0, "max_tokens": 12, "min_tokens": 3, "logit_bias": {str(EOS): 100}}
    outcomes = through_every_door(doors, req)
    assert set(outcomes) == set(DOORS) - set(ANTHROPIC) - set(OLLAMA)
    assert_agree(outcomes, Outcome(text, "stop", 3))


def test_an_eos_the_model_chose(doors: Doors, oracle: DirectGenerator) -> None:
    # No bias and no min_tokens, so Anthropic's doors are in too.
    d = replace(doors, prompt_text=oracle.chat_prompt(ENDS_BY_ITSELF), messages=ENDS_BY_ITSELF)
    text, tokens = oracle.greedy(d.prompt_text, 40)
    assert len(tokens) < 40, "the oracle did not stop by itself; pick another prompt"
    outcomes = through_every_door(d, {"temperature": 0, "max_tokens": 40})
    assert set(outcomes) == set(DOORS)
    assert_agree(outcomes, Outcome(text, "stop", len(tokens)))


def test_a_timeout_before_the_first_token(oracle: DirectGenerator) -> None:
    with open_doors(oracle, request_timeout=1e-6) as d:
        outcomes = through_every_door(d, {"temperature": 0, "max_tokens": 12})
    assert set(outcomes) == set(DOORS)
    assert_all_timed_out(outcomes, "")


def test_a_timeout_mid_answer_is_an_error_after_what_was_streamed(
    doors: Doors, oracle: DirectGenerator
) -> None:
    req = {"temperature": 0, "max_tokens": 1900, "min_tokens": 1900}
    full = "".join(
        t for t, _ in doors.generator.stream_generate(MESSAGES, **_in_process_options(req))
    )
    with open_doors(oracle, request_timeout=0.05) as d:
        outcomes = through_every_door(d, req)
    # Anthropic's doors take no min_tokens, and the demo model ends its turns long before a
    # timeout: their timeout mid-stream is checked over a fake handle (tests/routes/).
    assert set(outcomes) == set(DOORS) - set(ANTHROPIC)
    assert_all_timed_out(outcomes, full)
    streamed = [o.text for o in outcomes.values() if o.text]
    assert streamed, "no stream showed anything before the timeout; the test proves little"
