"""A tool call that does not fit, on the demo model through every door that takes tools (issue
48): the lazy grammar holds a call from its marker on, so an output that ends inside it is a
failed call in the door's ``failed_tool_calls`` extension, never text; an ordinary call still
parses and a plain answer is unchanged, streamed and not, on the batch and generator
schedulers.

Two ways to end inside a call: a small token limit, where each cut is read off the whole
call's tokens so that it stays inside the call whatever the demo model's weights; and a model
that runs on (kept from closing its string by a bias against quotes, as the demo model ran on
under Codex CLI on an Intel CPU), whose argument ends at the request's room. The same answers
over a fake handle, with text before the call: tests/routes/door/test_failed_calls.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR
from tests.conftest import make_client, metric, wait_ready
from tests.routes.door.test_failed_calls import (
    CMD,
    DOORS,
    Chat,
    Said,
    functions,
    openai,
)

pytestmark = pytest.mark.model

CUT = 'genai_grammar_failures_total{model="onnx-genai",stage="cut"}'
ROOM = 128  # GENAI_DEFAULT_MAX_TOKENS here: prompt and output stay within the window

# An agent's turn, as Codex CLI sends it: instructions, its environment, the ask, its tools.
INSTRUCTIONS = " ".join(
    [
        "You are a coding agent running in a terminal on the user's computer.",
        "Keep going until the user's task is done, then end your turn.",
        "Use the exec_command tool to run shell commands, read_file to read a file and",
        "update_plan to keep a short plan of the steps left.",
    ]
    * 2  # the prompt and the call stay within the sliding window (528 positions)
)
AGENT = Chat(
    user=[
        "<environment_context>\n  <cwd>/tmp/tmpq7x2k9ab/work</cwd>\n  <shell>bash</shell>\n"
        "</environment_context>",
        "Run the command echo hello.",
    ],
    system=INSTRUCTIONS,
    tools={
        "exec_command": CMD,
        "read_file": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        "update_plan": {
            "type": "object",
            "properties": {"plan": {"type": "string"}},
            "required": ["plan"],
        },
    },
    limit=200,
)
CALLED = {"chat.completions": "tool_calls", "responses": "completed", "messages": "tool_use"}
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


def _tokens(client: TestClient) -> list[str]:
    """The texts of the tokens of the agent's whole answer (a call)."""
    body = {"messages": AGENT.messages(), "tools": functions(AGENT), "temperature": 0}
    resp = client.post("/v1/chat/completions", json={**body, "max_tokens": 200, "logprobs": True})
    assert resp.status_code == 200, resp.text
    return [t["token"] for t in resp.json()["choices"][0]["logprobs"]["content"]]


def _through(tokens: list[str], text: str) -> int:
    """How many tokens it takes for the output to hold ``text``."""
    return next(k for k in range(len(tokens) + 1) if text in "".join(tokens[:k]))


@pytest.fixture(scope="module", params=["batch", "generator"])
def client(request: pytest.FixtureRequest) -> Iterator[TestClient]:
    """The app on each scheduler that runs the lazy grammar, with a small room for a request
    that sets no token limit."""
    with make_client(scheduler=request.param, default_max_tokens=ROOM) as c:
        wait_ready(c)
        yield c


@pytest.fixture(scope="module")
def whole(client: TestClient) -> tuple[Said, list[str]]:
    said = openai(client, AGENT, stream=False)
    assert said.finish == "tool_calls" and [n for n, _ in said.calls] == ["exec_command"], said
    return said, _tokens(client)


@STREAM
@pytest.mark.parametrize("door", DOORS)
def test_an_ordinary_call_still_parses(
    client: TestClient, whole: tuple[Said, list[str]], door: str, stream: bool
) -> None:
    read = DOORS[door][0]
    got = read(client, AGENT, stream)
    assert got == Said("", CALLED.get(door, "stop"), None, whole[0].calls), got


@STREAM
@pytest.mark.parametrize("door", DOORS)
def test_a_call_that_does_not_fit_is_a_failed_call_never_text(
    client: TestClient, whole: tuple[Said, list[str]], door: str, stream: bool
) -> None:
    read, at_limit, _ = DOORS[door]
    tokens = whole[1]
    before = metric(client.get("/metrics").text, CUT)
    # Cut one token into the command's string (the name was read), and right after the
    # marker (no name yet).
    for limit, name in [
        (_through(tokens, '"cmd": "') + 1, "exec_command"),
        (_through(tokens, "<tool_call>"), None),
    ]:
        got = read(client, replace(AGENT, limit=limit), stream)
        reason = f"the call did not fit in the {limit} tokens the request may generate"
        assert got == Said("", at_limit, [{"name": name, "reason": reason}]), (limit, got)
    assert metric(client.get("/metrics").text, CUT) == before + 2


@STREAM
@pytest.mark.parametrize("door", DOORS)
def test_a_plain_answer_with_tools_offered_is_unchanged(
    client: TestClient, door: str, stream: bool
) -> None:
    chat = replace(AGENT, user=["Tell me about the river."], system=None, limit=40)
    expected = openai(client, chat, stream=False)
    assert expected.text and not expected.calls and expected.failed is None, expected
    read, _, stopped = DOORS[door]
    assert read(client, chat, stream) == replace(expected, finish=stopped)


def _quotes() -> dict[str, float]:
    """A bias that keeps the model from writing any token with a double quote in it where it
    has a choice: under the grammar it then never closes a string argument (as the demo model
    ran on under Codex CLI on an Intel CPU), though it still writes the quotes the grammar
    requires."""
    vocab = json.loads((DEMO_MODEL_DIR / "tokenizer.json").read_text())["model"]["vocab"]
    return {str(i): -100.0 for token, i in vocab.items() if '"' in token}


@STREAM
@pytest.mark.parametrize("door", ["chat.completions", "responses"])  # those with logit_bias
def test_a_string_argument_that_runs_on_ends_at_the_requests_room(
    client: TestClient, door: str, stream: bool
) -> None:
    read, at_limit, _ = DOORS[door]
    got = read(client, replace(AGENT, limit=None, logit_bias=_quotes()), stream)
    reason = f"the call did not fit in the {ROOM} tokens the request may generate"
    assert got == Said("", at_limit, [{"name": "exec_command", "reason": reason}]), got
