"""Contract: the clients people point at Ollama, against a live server process (main_genai.py)
on the demo model: the official ``ollama`` Python client, LangChain's ``ChatOllama`` and
LiteLLM's ``ollama_chat/`` provider; and a stream closed early cancels its generation.

Ollama has no ``tool_choice``; this server's ``options.tool_choice`` extension forces the
calls, since the demo model does not call tools by itself."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import ollama
import pytest

from bench.harness.server import ServerProcess, live_server
from tests.conftest import DEMO_CONTEXT, metric

pytestmark = pytest.mark.live

KEY = "ollama-contract-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
MODEL = "onnx-genai"
ASK = [{"role": "user", "content": "Name three rivers and a mountain."}]
GREEDY = {"temperature": 0, "num_predict": 8, "min_tokens": 8}
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
            "required": ["city"],
        },
    },
}
FORCED = {"temperature": 0, "num_predict": 80, "tool_choice": "get_weather"}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with live_server(GENAI_API_KEY=KEY) as s:
        yield s


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> ollama.Client:
    return ollama.Client(host=server.url, headers=AUTH, timeout=60)


# ---- the official client -----------------------------------------------------------------------
def test_list_show_and_ps(api: ollama.Client) -> None:
    [listed] = api.list().models
    assert listed.model == MODEL and listed.details is not None
    assert listed.details.family == "mistral" and listed.details.quantization_level == "Q4"
    shown = api.show(MODEL)
    assert shown.capabilities == ["completion", "tools"]
    assert shown.modelinfo is not None and shown.modelinfo["mistral.context_length"] == DEMO_CONTEXT
    [running] = api.ps().models
    assert running.model == MODEL and running.context_length == DEMO_CONTEXT


def test_chat_whole_and_streamed_agree_with_durations_that_add_up(api: ollama.Client) -> None:
    whole = api.chat(model=MODEL, messages=ASK, options=GREEDY)
    assert whole.done and whole.done_reason == "length" and whole.eval_count == 8
    assert whole.message.content
    durations = (whole.load_duration, whole.prompt_eval_duration, whole.eval_duration)
    assert all(d is not None for d in durations) and whole.total_duration
    assert whole.prompt_eval_duration and whole.eval_duration
    assert sum(d or 0 for d in durations) <= whole.total_duration

    parts = list(api.chat(model=MODEL, messages=ASK, options=GREEDY, stream=True))
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    assert parts[-1].eval_count == 8


def test_chat_with_a_schema_as_format(api: ollama.Client) -> None:
    # No other keys: the schema alone decides where the answer ends.
    schema = {**WEATHER["function"]["parameters"], "additionalProperties": False}
    out = api.chat(model=MODEL, messages=ASK, format=schema, options={"temperature": 0})
    assert json.loads(out.message.content or "")["city"] in ("Paris", "Rome")


def test_chat_with_tools_and_a_tool_round_trip(api: ollama.Client) -> None:
    asked: list[Any] = [{"role": "user", "content": "What is the weather in Rome?"}]
    first = api.chat(model=MODEL, messages=asked, tools=[WEATHER], options=FORCED)
    [call] = first.message.tool_calls or []
    assert call.function.name == "get_weather"
    city = call.function.arguments["city"]
    assert city in ("Paris", "Rome")
    result = {"role": "tool", "content": f"sunny in {city}", "tool_name": "get_weather"}
    answering = {**GREEDY, "tool_choice": "none"}  # an answer, not another call
    answer = api.chat(
        model=MODEL, messages=[*asked, first.message, result], tools=[WEATHER], options=answering
    )
    assert answer.message.content and not answer.message.tool_calls
    unanswered = api.chat(model=MODEL, messages=asked, tools=[WEATHER], options=answering)
    # The call and its result went into the prompt.
    assert (answer.prompt_eval_count or 0) > (unanswered.prompt_eval_count or 0) + 10


def test_streamed_tools_arrive_whole(api: ollama.Client) -> None:
    parts = list(api.chat(model=MODEL, messages=ASK, tools=[WEATHER], options=FORCED, stream=True))
    calls = [c for p in parts for c in p.message.tool_calls or []]
    assert len(calls) == 1 and calls[0].function.arguments["city"] in ("Paris", "Rome")


def test_think_is_refused_on_a_model_that_does_not_think(api: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as exc:
        api.chat(model=MODEL, messages=ASK, think=True)
    assert exc.value.status_code == 400 and "thinking" in exc.value.error
    assert api.chat(model=MODEL, messages=ASK, think=False, options=GREEDY).eval_count == 8


def test_think_on_a_model_with_a_reasoning_format() -> None:
    with live_server(GENAI_REASONING_PARSER="think") as s:
        api = ollama.Client(host=s.url, timeout=60)
        assert "thinking" in (api.show(MODEL).capabilities or [])
        out = api.chat(model=MODEL, messages=ASK, think=True, options=GREEDY)
        assert out.eval_count == 8 and (out.message.content or out.message.thinking)
        made = api.generate(model=MODEL, prompt="Once upon a time", think="low", options=GREEDY)
        assert made.eval_count == 8


def test_generate_whole_and_streamed(api: ollama.Client) -> None:
    whole = api.generate(model=MODEL, prompt="Once upon a time", options=GREEDY)
    assert whole.done and whole.eval_count == 8 and whole.response
    parts = list(api.generate(model=MODEL, prompt="Once upon a time", options=GREEDY, stream=True))
    assert parts[-1].done and "".join(p.response or "" for p in parts) == whole.response
    raw = api.generate(model=MODEL, prompt="Once upon a time", raw=True, options=GREEDY)
    assert (raw.prompt_eval_count or 0) < (whole.prompt_eval_count or 0)


def test_what_this_server_does_another_way_is_a_clear_error(api: ollama.Client) -> None:
    # A pull is an admin action (docs/api/ollama.md): a user key is told which key it takes.
    with pytest.raises(ollama.ResponseError) as exc:
        api.pull("llama3.2")
    assert exc.value.status_code == 403 and "GENAI_ADMIN_API_KEY" in exc.value.error
    with pytest.raises(ollama.ResponseError) as exc:
        api.chat(model="llama3.2", messages=ASK)
    assert exc.value.status_code == 404


def test_closing_a_stream_cancels_its_generation(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
        before = metric(client.get("/metrics").text, "genai_requests_cancelled_total")
        api = ollama.Client(host=server.url, headers=AUTH, timeout=60)
        long = {"temperature": 0, "num_predict": 1900, "min_tokens": 1900}
        parts: Any = api.chat(model=MODEL, messages=ASK, options=long, stream=True)
        for n, _ in enumerate(parts):
            if n == 10:
                break
        parts.close()  # the client's generator: its stream and connection close here
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            text = client.get("/metrics").text
            if metric(text, "genai_requests_cancelled_total") > before:
                break
            time.sleep(0.05)
        assert metric(text, "genai_requests_cancelled_total") == before + 1
        assert metric(text, "genai_requests_running") == 0


# ---- frameworks --------------------------------------------------------------------------------
def test_langchain_chat_ollama_invokes_streams_and_binds_tools(server: ServerProcess) -> None:
    from langchain_ollama import ChatOllama

    llm = ChatOllama(
        model=MODEL,
        base_url=server.url,
        client_kwargs={"headers": AUTH},
        temperature=0,
        num_predict=8,
    )
    said = llm.invoke("Name three rivers and a mountain.")
    assert isinstance(said.content, str) and said.content
    assert said.usage_metadata is not None and said.usage_metadata["output_tokens"] <= 8
    streamed = "".join(str(chunk.content) for chunk in llm.stream(ASK[0]["content"]))
    assert streamed == said.content

    bound = llm.bind_tools([WEATHER])
    message = bound.invoke("What is the weather in Rome?", options=FORCED)
    [call] = message.tool_calls
    assert call["name"] == "get_weather" and call["args"]["city"] in ("Paris", "Rome")


def test_litellm_ollama_chat(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the network
    import litellm

    route = {"model": f"ollama_chat/{MODEL}", "api_base": server.url, "api_key": KEY}
    out = litellm.completion(**route, messages=ASK, max_tokens=8, temperature=0)
    text = out.choices[0].message.content
    assert text and out.usage.completion_tokens <= 8
    chunks = list(
        litellm.completion(**route, messages=ASK, max_tokens=8, temperature=0, stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text

    asked = [{"role": "user", "content": "Weather in Paris?"}]
    first = litellm.completion(
        **route, messages=asked, tools=[WEATHER], extra_body={"options": FORCED}
    )
    [call] = first.choices[0].message.tool_calls
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome")
    answer = litellm.completion(
        **route,
        messages=[
            *asked,
            first.choices[0].message,
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        max_tokens=8,
        temperature=0,
    )
    assert answer.choices[0].message.content
