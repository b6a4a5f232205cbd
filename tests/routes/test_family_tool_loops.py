"""A whole tool loop through the real app on the demo model dressed in each family's published
chat template (tests/backends/chat/families/): the forced call comes back with an id the
family's template accepts, and the client's next turn (the call with ``content: null``, the
tool's result) renders and answers, on the OpenAI and Anthropic doors."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR
from tests.conftest import make_client, wait_ready

pytestmark = pytest.mark.model

FAMILIES = Path(__file__).parent.parent / "backends" / "chat" / "families"
TEMPLATES = json.loads((FAMILIES / "families.json").read_text(encoding="utf-8"))["families"]
MISTRAL = {"devstral", "ministral3_reasoning", "mistral_nemo", "mistral_small_3_2"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
ASK = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
]


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def family(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, TestClient]]:
    name = request.param
    folder = tmp_path_factory.mktemp(name) / "model"
    shutil.copytree(DEMO_MODEL_DIR, folder)
    shutil.copy(
        FAMILIES / "templates" / TEMPLATES[name]["template"], folder / "chat_template.jinja"
    )
    with make_client(model_dir=folder) as client:
        wait_ready(client)
        yield name, client


def chat(client: TestClient, **body: Any) -> dict[str, Any]:
    resp = client.post("/v1/chat/completions", json={"tools": [WEATHER], **body})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_a_tool_loop_goes_round(family: tuple[str, TestClient]) -> None:
    name, client = family
    first = chat(
        client,
        messages=ASK,
        tool_choice="required",
        parallel_tool_calls=False,
        seed=1,
        max_tokens=256,  # the DeepSeek markers are many tokens each in the demo vocabulary
    )
    [call] = first["choices"][0]["message"]["tool_calls"][:1]
    if name in MISTRAL:
        assert re.fullmatch(r"[A-Za-z0-9]{9}", call["id"]), call["id"]
    result = {"role": "tool", "tool_call_id": call["id"], "content": '{"sky": "cloudy"}'}
    loop = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call]}, result]
    answered = chat(client, messages=loop, temperature=0, max_tokens=4)
    assert answered["usage"]["prompt_tokens"] > first["usage"]["prompt_tokens"]
    follow_up = [
        *loop,
        {"role": "assistant", "content": "Cloudy."},
        {"role": "user", "content": "And in Rome?"},
    ]
    chat(client, messages=follow_up, temperature=0, max_tokens=4)


def test_a_tool_loop_goes_round_on_the_anthropic_door(family: tuple[str, TestClient]) -> None:
    name, client = family
    tool = {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}  # type: ignore[index]
    body: dict[str, Any] = {
        "model": client.get("/v1/models").json()["data"][0]["id"],
        "max_tokens": 256,
        "system": "You are a helpful assistant.",
        "tools": [tool],
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    }
    resp = client.post(
        "/v1/messages", json={**body, "tool_choice": {"type": "tool", "name": "get_weather"}}
    )
    assert resp.status_code == 200, resp.text
    [use] = [b for b in resp.json()["content"] if b["type"] == "tool_use"][:1]
    if name in MISTRAL:
        assert re.fullmatch(r"toolu_[A-Za-z0-9]{9}", use["id"]), use["id"]
    body["messages"] += [
        {"role": "assistant", "content": [use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "cloudy"}],
        },
    ]
    resp = client.post("/v1/messages", json={**body, "max_tokens": 4})
    assert resp.status_code == 200, resp.text


# A template bug that only shows on a tool result: Python's TypeError, not Jinja's own error.
BROKEN = "{% for m in messages %}{{ m.content + (1 if m.role == 'tool' else '') }}{% endfor %}"


def test_any_exception_a_template_raises_is_a_400_naming_the_message(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(DEMO_MODEL_DIR, folder)
    (folder / "chat_template.jinja").write_text(BROKEN)
    messages = [*ASK, {"role": "tool", "tool_call_id": "a", "content": "sunny"}]
    with make_client(model_dir=folder) as client:
        wait_ready(client)
        resp = client.post("/v1/chat/completions", json={"messages": messages})
        assert resp.status_code == 400, resp.text
        error = resp.json()["error"]
        assert error["param"] == "messages.2" and "TypeError" in error["message"]
        assert client.post(
            "/v1/chat/completions", json={"messages": ASK, "max_tokens": 1}
        ).is_success
