"""Contract: the official ``openai`` client against a live server process (main_genai.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Literal

import httpx
import openai
import pytest
from openai import OpenAI
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from bench.harness.server import live_server
from tests.conftest import DEMO_CONTEXT

pytestmark = pytest.mark.live

KEY = "contract-test-key"
MODEL = "onnx-genai"
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Name three rivers and a mountain."}
]
PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with live_server(GENAI_API_KEY=KEY) as server:
        yield f"{server.url}/v1"


@pytest.fixture(scope="module")
def api(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=60)


def test_models(api: OpenAI) -> None:
    [model] = api.models.list().data
    assert model.id == MODEL
    assert api.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        api.models.retrieve("gpt-9")


def test_chat_completion_and_its_stream_agree(api: OpenAI) -> None:
    done = api.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        temperature=0,
        max_tokens=16,
        extra_body={"min_tokens": 16},  # the demo model would end its turn sooner
    )
    assert done.object == "chat.completion"
    assert done.choices[0].finish_reason == "length"
    assert done.usage is not None and done.usage.completion_tokens == 16
    assert done.model_extra is not None and done.model_extra["metrics"]["output_tokens"] == 16
    text = done.choices[0].message.content
    assert text

    chunks = list(
        api.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            temperature=0,
            max_tokens=16,
            extra_body={"min_tokens": 16},
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens == 16
    assert usage_chunk.usage.prompt_tokens_details is not None
    assert usage_chunk.model_extra is not None and usage_chunk.model_extra["metrics"]
    assert chunks[-2].choices[0].finish_reason == "length"


def test_completion_and_its_stream_agree(api: OpenAI) -> None:
    done = api.completions.create(model=MODEL, prompt=PROMPT, temperature=0, max_tokens=12)
    assert done.object == "text_completion"
    text = done.choices[0].text
    assert text
    streamed = "".join(
        c.choices[0].text
        for c in api.completions.create(
            model=MODEL, prompt=PROMPT, temperature=0, max_tokens=12, stream=True
        )
        if c.choices
    )
    assert streamed == text


def test_a_prompt_of_token_ids_answers_as_its_text(api: OpenAI, base_url: str) -> None:
    # The ids a render route gives (the SDK has none), sent back through the SDK.
    rendered = httpx.post(
        f"{base_url}/completions/render",
        json={"prompt": PROMPT},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    ids = rendered.json()[0]["token_ids"]
    as_ids = api.completions.create(model=MODEL, prompt=ids, temperature=0, max_tokens=12)
    as_text = api.completions.create(model=MODEL, prompt=PROMPT, temperature=0, max_tokens=12)
    assert as_ids.choices[0].text == as_text.choices[0].text
    assert as_ids.usage is not None and as_ids.usage.prompt_tokens == len(ids)


def test_stop_is_cut_and_reported(api: OpenAI) -> None:
    # min_tokens: the demo model would end this raw text after a token or two.
    more = {"min_tokens": 20}
    full = api.completions.create(
        model=MODEL, prompt=PROMPT, temperature=0, max_tokens=20, extra_body=more
    )
    text = full.choices[0].text
    stop = text[5:8]
    cut = api.completions.create(
        model=MODEL, prompt=PROMPT, temperature=0, max_tokens=20, stop=[stop], extra_body=more
    )
    assert cut.choices[0].text == text[: text.find(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_seed_reproducibility_and_n(api: OpenAI) -> None:
    def sample(seed: int, n: int = 1) -> list[str]:
        resp = api.chat.completions.create(
            model=MODEL, messages=MESSAGES, temperature=1.0, max_tokens=10, seed=seed, n=n
        )
        return [c.message.content or "" for c in resp.choices]

    assert sample(seed=5) == sample(seed=5)
    three = sample(seed=5, n=3)
    assert len(three) == 3
    assert three[0] == sample(seed=5)[0] and three[2] == sample(seed=7)[0]


def test_logprobs(api: OpenAI) -> None:
    resp = api.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        temperature=0,
        max_tokens=5,
        logprobs=True,
        top_logprobs=2,
        extra_body={"min_tokens": 5},
    )
    logprobs = resp.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    assert len(logprobs.content) == 5
    for entry in logprobs.content:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 2
        assert entry.top_logprobs[0].token == entry.token
    comp = api.completions.create(
        model=MODEL,
        prompt=PROMPT,
        temperature=0,
        max_tokens=4,
        logprobs=1,
        extra_body={"min_tokens": 4},
    )
    assert comp.choices[0].logprobs is not None
    assert len(comp.choices[0].logprobs.tokens or []) == 4


def test_json_schema_response_format(api: OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}},
        "required": ["colour"],
        "additionalProperties": False,
    }
    for seed in (1, 2, 3):
        resp = api.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=40,
            temperature=1.0,
            seed=seed,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "colour", "schema": schema, "strict": True},
            },
        )
        value = json.loads(resp.choices[0].message.content or "")
        assert value.keys() == {"colour"} and value["colour"] in ("red", "green", "blue")


def test_errors_map_to_client_exceptions(api: OpenAI, base_url: str) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        api.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            functions=[{"name": "f", "parameters": {}}],
        )
    assert "functions" in str(bad.value)
    with pytest.raises(openai.BadRequestError, match="context"):
        api.completions.create(model=MODEL, prompt=PROMPT, max_tokens=DEMO_CONTEXT + 1000)
    with pytest.raises(openai.NotFoundError):
        api.chat.completions.create(model="gpt-9", messages=MESSAGES)
    wrong = OpenAI(base_url=base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()


def test_extension_parameters_through_extra_body(api: OpenAI) -> None:
    resp = api.completions.create(
        model=MODEL,
        prompt=PROMPT,
        temperature=0,
        max_tokens=8,
        extra_body={"min_tokens": 8, "top_k": 5, "repetition_penalty": 1.1},
    )
    assert resp.usage is not None and resp.usage.completion_tokens == 8


WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def test_a_forced_tool_call_round_trip(api: OpenAI) -> None:
    asked: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Weather in Paris?"}]
    done = api.chat.completions.create(
        model=MODEL,
        messages=asked,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        seed=3,
        max_tokens=80,
    )
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert calls and all(c.type == "function" for c in calls)
    call = calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome")

    streamed = list(
        api.chat.completions.create(
            model=MODEL,
            messages=asked,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            parallel_tool_calls=False,
            seed=3,
            max_tokens=80,
            stream=True,
        )
    )
    parts = [d for c in streamed if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert parts and parts[0].function is not None and parts[0].function.name == "get_weather"
    arguments = "".join((p.function.arguments or "") if p.function else "" for p in parts)
    assert json.loads(arguments)["city"] in ("Paris", "Rome")

    answer = api.chat.completions.create(
        model=MODEL,
        messages=[
            *asked,
            done.choices[0].message,  # type: ignore[list-item]  # appended as clients do
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=[WEATHER],
        max_tokens=8,
        temperature=0,
    )
    assert answer.choices[0].message.content


def test_the_demo_model_ends_its_turn_and_calls_an_offered_tool(api: OpenAI) -> None:
    # No min_tokens, no forced call: what the trained demo model does by itself, greedy.
    done = api.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Hello!"}],
        temperature=0,
        max_tokens=200,
    )
    assert done.choices[0].finish_reason == "stop" and done.choices[0].message.content
    assert done.usage is not None and done.usage.completion_tokens < 200
    called = api.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],
        temperature=0,
        max_tokens=200,
    )
    choice = called.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall) and call.function.name
    assert isinstance(json.loads(call.function.arguments), dict)


def test_langchain_binds_tools_and_gets_a_parsed_call(base_url: str) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=base_url, api_key=KEY, model=MODEL, max_tokens=80, seed=5)
    bound = llm.bind_tools([dict(WEATHER)], tool_choice="get_weather", parallel_tool_calls=False)
    message = bound.invoke("What is the weather in Rome?")
    [call] = message.tool_calls
    assert call["name"] == "get_weather" and call["args"]["city"] in ("Paris", "Rome")


def test_a_langchain_tool_loop_runs_the_tool_and_answers(base_url: str) -> None:
    """LangChain's tool-calling loop: the model calls the tool, the tool runs, its result goes
    back as a ToolMessage, and the model answers."""
    from langchain_core.messages import BaseMessage, HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    ran: list[str] = []

    @tool
    def get_weather(city: Literal["Paris", "Rome"]) -> str:
        """The weather in a city."""
        ran.append(city)
        return "sunny"

    llm = ChatOpenAI(base_url=base_url, api_key=KEY, model=MODEL, max_tokens=80, seed=5)
    forced = llm.bind_tools([get_weather], tool_choice="get_weather", parallel_tool_calls=False)
    messages: list[BaseMessage] = [HumanMessage("What is the weather in Rome?")]
    asked = forced.invoke(messages)
    messages.append(asked)
    for call in asked.tool_calls:
        messages.append(get_weather.invoke(call))
    answer = llm.bind(max_tokens=8, temperature=0).invoke(messages)
    assert ran and ran[0] in ("Paris", "Rome")
    assert isinstance(answer.content, str) and answer.content


def test_litellm_runs_a_tool_round_trip(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the network
    import litellm

    route = {"model": f"openai/{MODEL}", "api_base": base_url, "api_key": KEY}
    asked = [{"role": "user", "content": "Weather in Paris?"}]
    first = litellm.completion(
        **route,
        messages=asked,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        seed=3,
        max_tokens=80,
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome")
    answer = litellm.completion(
        **route,
        messages=[
            *asked,
            choice.message,
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=[WEATHER],
        max_tokens=8,
        temperature=0,
    )
    assert answer.choices[0].message.content
