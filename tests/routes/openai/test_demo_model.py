"""The committed demo model is trained (modelkit/decoder.py --train-steps): greedy, it ends
its turns with <|im_end|>, answers in words of its corpus, and calls a tool its system prompt
offers when the user asks for what the tool does. Each answer is also the og.Generator oracle's
on the same folder, token for token."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from modelkit.demo.corpus import ADJECTIVES, NOUNS, PLACES, VERBS
from tests.conftest import DirectGenerator, parse_sse

pytestmark = pytest.mark.model

WORDS = {
    w.lower()
    for w in [*NOUNS, *ADJECTIVES, *" ".join(VERBS).split(), *" ".join(PLACES).split()]
    + "the a an is and i think yes can every it done".split()
}
CHATS = [
    "Tell me about the river.",
    "Hello!",
    "Why is the server slow?",
    "Write a short story about a bird.",
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}},
            "required": ["city"],
        },
    },
}
SHELL = {
    "type": "function",
    "function": {
        "name": "shell",
        "description": "Runs a shell command and returns its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command to run."}},
            "required": ["command"],
        },
    },
}


def chat(client: TestClient, messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    resp = client.post(
        "/v1/chat/completions",
        json={"messages": messages, "temperature": 0, "max_tokens": 200, **body},
    )
    assert resp.status_code == 200, resp.text
    [choice] = resp.json()["choices"]
    return dict(choice)


@pytest.mark.parametrize("question", CHATS)
def test_a_plain_chat_turn_ends_in_words_of_the_corpus(
    client: TestClient, oracle: DirectGenerator, question: str
) -> None:
    messages = [{"role": "user", "content": question}]
    choice = chat(client, messages)
    assert choice["finish_reason"] == "stop"
    text = choice["message"]["content"]
    words = re.findall(r"[A-Za-z]+", text)
    assert words and {w.lower() for w in words} <= WORDS, text
    assert text.rstrip()[-1] in ".!?"
    # The oracle stops at the same end-of-turn token, well before its 200-token room.
    expected, tokens = oracle.greedy(oracle.chat_prompt(messages), 200)
    assert text == expected and len(tokens) < 200


def test_a_chat_with_a_system_prompt_and_earlier_turns_ends(client: TestClient) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "The small model is fast and clear."},
        {"role": "user", "content": "Tell me about the city."},
    ]
    assert chat(client, messages)["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("tools", "ask"),
    [
        ([WEATHER], "What is the weather in Paris?"),
        ([WEATHER], "What is the weather in Oslo?"),
        ([SHELL, WEATHER], "Run the command ls."),
    ],
)
def test_an_offered_tool_gets_a_well_formed_call(
    client: TestClient, oracle: DirectGenerator, tools: list[dict[str, Any]], ask: str
) -> None:
    # The call is parsed out of the model's own hermes block; which tool and which values it
    # picks the short training does not make reliable (docs/models.md), so only its form is
    # checked, and the text against the oracle.
    messages = [{"role": "user", "content": ask}]
    choice = chat(client, messages, tools=tools)
    assert choice["finish_reason"] == "tool_calls", choice
    [made] = choice["message"]["tool_calls"]
    assert made["type"] == "function" and made["function"]["name"]
    assert isinstance(json.loads(made["function"]["arguments"]), dict)
    assert choice["message"]["content"] is None
    prompt = oracle.tokenizer.apply_chat_template(
        json.dumps(messages), tools=json.dumps(tools), add_generation_prompt=True
    )
    text, tokens = oracle.greedy(str(prompt), 200)
    assert text.startswith("<tool_call>") and text.rstrip().endswith("</tool_call>")
    assert len(tokens) < 200  # it ended its turn after the call
    call = json.loads(text.strip().removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert call["name"] == made["function"]["name"]
    assert call["arguments"] == json.loads(made["function"]["arguments"])


def test_the_call_streams_as_tool_call_deltas(client: TestClient) -> None:
    body = {
        "messages": [{"role": "user", "content": "What is the weather in Rome?"}],
        "tools": [WEATHER],
        "temperature": 0,
        "max_tokens": 200,
    }
    [whole] = client.post("/v1/chat/completions", json=body).json()["choices"][0]["message"][
        "tool_calls"
    ]
    with client.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as resp:
        chunks = [json.loads(p) for p in parse_sse(resp.iter_lines()) if p != "[DONE]"]
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    parts = [p for c in choices for p in c["delta"].get("tool_calls") or []]
    assert parts[0]["function"]["name"] == whole["function"]["name"]
    arguments = "".join(p["function"].get("arguments") or "" for p in parts)
    assert json.loads(arguments) == json.loads(whole["function"]["arguments"])
    assert choices[-1]["finish_reason"] == "tool_calls"


def test_after_the_tool_result_the_model_answers_and_ends(client: TestClient) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "The sun is warm in the city."},
    ]
    choice = chat(client, messages, tools=[WEATHER])
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] and not choice["message"].get("tool_calls")
