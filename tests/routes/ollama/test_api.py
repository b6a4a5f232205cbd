"""Ollama's API through the real app on the demo model: what each field does (streaming by
default, format, tools and the tool_choice extension, think, seed, logprobs, system, raw,
num_ctx, keep_alive), durations that add up, the model listings, / and the routes this server
does another way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import DEMO_CONTEXT, make_client, wait_ready

pytestmark = pytest.mark.model

MODEL = "onnx-genai"
ASK = [{"role": "user", "content": "Name three rivers and a mountain."}]
WEATHER = {
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
GREEDY = {"temperature": 0, "num_predict": 8, "min_tokens": 8}


def chat(client: TestClient, **fields: Any) -> dict[str, Any]:
    body = {"model": MODEL, "messages": ASK, "stream": False, **fields}
    resp = client.post("/api/chat", json=body)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    return out


def lines(client: TestClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A stream's lines, each parsed on its own."""
    with client.stream("POST", path, json=body) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"] == "application/x-ndjson"
        return [json.loads(line) for line in resp.iter_lines() if line]


# ---- generation --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
def test_a_stream_is_the_default_its_lines_parse_and_the_last_is_done(
    client: TestClient, path: str
) -> None:
    said = {"messages": ASK} if path == "/api/chat" else {"prompt": "Once upon a time"}
    sent = lines(client, path, {"model": MODEL, **said, "options": GREEDY})
    assert len(sent) > 2
    assert [s["done"] for s in sent] == [False] * (len(sent) - 1) + [True]
    last = sent[-1]
    assert last["done_reason"] == "length" and last["eval_count"] == 8

    whole = client.post(path, json={"model": MODEL, **said, "options": GREEDY, "stream": False})
    key = "response" if path == "/api/generate" else None

    def text(line: dict[str, Any]) -> str:
        return str(line[key] if key else line["message"]["content"])

    assert "".join(text(s) for s in sent) == text(whole.json())
    assert whole.json()["eval_count"] == 8


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
def test_durations_are_positive_nanoseconds_that_add_up(client: TestClient, path: str) -> None:
    said = {"messages": ASK} if path == "/api/chat" else {"prompt": ASK[0]["content"]}
    body = {"model": MODEL, **said, "options": GREEDY, "stream": False}
    out = client.post(path, json=body).json()
    for name in ("total_duration", "prompt_eval_duration", "eval_duration"):
        assert isinstance(out[name], int) and out[name] > 0, name
    assert out["load_duration"] >= 0
    parts = out["load_duration"] + out["prompt_eval_duration"] + out["eval_duration"]
    assert parts <= out["total_duration"]
    # Ollama's eval rate is plausible: 8 tokens in under a second on the demo model.
    assert out["eval_duration"] < 1e9
    openai = client.post(
        "/v1/chat/completions", json={"messages": ASK, "max_tokens": 1, "temperature": 0}
    )
    assert out["prompt_eval_count"] == openai.json()["usage"]["prompt_tokens"]


def test_format_as_a_schema_is_enforced(client: TestClient) -> None:
    # No other keys: the schema alone decides where the answer ends (with extra keys allowed,
    # a model may go on writing them to the token cap).
    params: dict[str, Any] = WEATHER["function"]["parameters"]  # type: ignore[index]
    schema = {**params, "additionalProperties": False}
    out = chat(client, format=schema, options={"temperature": 0, "num_predict": 40})
    assert out["done_reason"] == "stop"
    assert json.loads(out["message"]["content"])["city"] in ("Paris", "Rome")


@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
def test_a_schema_no_output_can_match_is_a_400_as_on_openai(client: TestClient, path: str) -> None:
    """{"$ref": "#"} is only itself: it answered 200 with empty content and done_reason stop."""
    said = {"messages": ASK} if path == "/api/chat" else {"prompt": "Once upon a time"}
    body = {"model": MODEL, **said, "stream": False, "format": {"$ref": "#"}}
    resp = client.post(path, json=body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"] == (
        "format: The json schema cannot be used: no output can match it (it allows no first token)"
    )
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": {"$ref": "#"}}}
    openai = client.post("/v1/chat/completions", json={"messages": ASK, "response_format": fmt})
    assert openai.status_code == 400
    assert openai.json()["error"]["message"] in resp.json()["error"]


def test_format_json_makes_the_answer_a_json_object(client: TestClient) -> None:
    plain = chat(client, options={"temperature": 0, "num_predict": 6})
    assert not plain["message"]["content"].startswith("{"), "pick a prompt that shows it"
    out = chat(client, format="json", options={"temperature": 0, "num_predict": 6})
    assert out["message"]["content"].startswith("{")


def test_a_forced_tool_call_and_its_round_trip(client: TestClient) -> None:
    forced = {"temperature": 0, "num_predict": 80, "tool_choice": "get_weather"}
    asked = [{"role": "user", "content": "Weather in Paris?"}]
    out = chat(client, messages=asked, tools=[WEATHER], options=forced)
    [call] = out["message"]["tool_calls"]
    assert call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather" and call["function"]["index"] == 0
    assert call["function"]["arguments"]["city"] in ("Paris", "Rome")
    assert out["done_reason"] == "stop"
    history = [
        *asked,
        out["message"],
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
    answer = chat(client, messages=history, tools=[WEATHER], options=GREEDY)
    assert answer["message"]["content"] and "tool_calls" not in answer["message"]
    assert answer["prompt_eval_count"] > out["prompt_eval_count"]


def test_a_streamed_tool_call_is_one_whole_line(client: TestClient) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Weather in Rome?"}],
        "tools": [WEATHER],
        "options": {"temperature": 0, "num_predict": 80, "tool_choice": "required"},
    }
    sent = lines(client, "/api/chat", body)
    with_calls = [s for s in sent if s["message"].get("tool_calls")]
    assert len(with_calls) == 1
    [call] = with_calls[0]["message"]["tool_calls"]
    assert call["function"]["arguments"]["city"] in ("Paris", "Rome")


def test_think_on_a_model_that_does_not_think_is_refused_by_name(client: TestClient) -> None:
    resp = client.post("/api/chat", json={"model": MODEL, "messages": ASK, "think": True})
    assert resp.status_code == 400
    assert resp.json() == {"error": "'onnx-genai' does not support thinking."}
    assert chat(client, think=False, options=GREEDY)["eval_count"] == 8


def test_think_on_a_model_with_a_reasoning_format() -> None:
    with make_client(reasoning_parser="think") as client:
        wait_ready(client)
        show = client.post("/api/show", json={"model": MODEL}).json()
        assert "thinking" in show["capabilities"]
        for think in (True, "low"):
            out = chat(client, think=think, options=GREEDY)
            assert out["eval_count"] == 8
            said = out["message"]["content"] + out["message"].get("thinking", "")
            assert said


def test_the_same_seed_samples_the_same_answer(client: TestClient) -> None:
    options = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 7, "num_predict": 12}
    first = chat(client, options=options)["message"]["content"]
    assert chat(client, options=options)["message"]["content"] == first


def test_logprobs_come_with_each_token(client: TestClient) -> None:
    out = chat(client, options=GREEDY, logprobs=True, top_logprobs=2)
    assert len(out["logprobs"]) == out["eval_count"] == 8
    assert all(len(p["top_logprobs"]) == 2 for p in out["logprobs"])
    assert all(p["token"] and p["logprob"] <= 0 for p in out["logprobs"])
    assert all(p["top_logprobs"][0]["logprob"] >= p["logprob"] for p in out["logprobs"])


def test_system_and_raw_change_what_the_model_reads(client: TestClient) -> None:
    def prompt_tokens(**fields: Any) -> int:
        body = {"model": MODEL, "prompt": "Hello there", "options": GREEDY, "stream": False}
        out = client.post("/api/generate", json={**body, **fields})
        assert out.status_code == 200, out.text
        return int(out.json()["prompt_eval_count"])

    templated = prompt_tokens()
    assert prompt_tokens(system="You are terse and kind.") > templated
    assert prompt_tokens(raw=True) < templated


def test_num_ctx_up_to_the_models_context_is_accepted_beyond_it_refused(
    client: TestClient,
) -> None:
    assert chat(client, options={**GREEDY, "num_ctx": DEMO_CONTEXT})["eval_count"] == 8
    resp = client.post(
        "/api/chat",
        json={"model": MODEL, "messages": ASK, "options": {"num_ctx": DEMO_CONTEXT + 1}},
    )
    assert resp.status_code == 400 and "options.num_ctx" in resp.json()["error"]


def test_keep_alive_sets_when_the_model_is_unloaded(client: TestClient) -> None:
    out = chat(client, keep_alive="1h", options=GREEDY)
    assert out["eval_count"] == 8
    [loaded] = client.get("/api/ps").json()["models"]
    assert loaded["expires_at"][:4] not in ("9999", "1970"), loaded
    chat(client, keep_alive=-1, options=GREEDY)
    [loaded] = client.get("/api/ps").json()["models"]
    assert loaded["expires_at"].startswith("9999"), "kept loaded"
    # keep_alive 0 (unloaded after the request) is in tests/app/test_model_lifecycle.py: this
    # client's model is shared by the session.


@pytest.mark.parametrize(("path", "said"), [("/api/chat", "messages"), ("/api/generate", "prompt")])
def test_nothing_to_say_is_ollamas_load_call(client: TestClient, path: str, said: str) -> None:
    body = {"model": MODEL, said: [] if said == "messages" else ""}
    out = client.post(path, json=body).json()
    assert out["done"] is True and out["done_reason"] == "load"
    resp = client.post(path, json={**body, "model": "llama3.2"})
    assert resp.status_code == 404 and "llama3.2" in resp.json()["error"]


# ---- models and the rest -----------------------------------------------------------------------
def test_tags_show_and_ps_describe_the_served_model(client: TestClient) -> None:
    [listed] = client.get("/api/tags").json()["models"]
    assert listed["name"] == listed["model"] == MODEL
    details = listed["details"]
    assert details["family"] == "mistral" and details["format"] == "onnx"
    assert (details["parameter_size"], details["quantization_level"]) == ("1.4M", "Q4")
    assert listed["size"] > 200_000 and len(listed["digest"]) == 64

    show = client.post("/api/show", json={"model": MODEL}).json()
    assert show["details"] == details
    assert show["capabilities"] == ["completion", "tools"]
    assert show["model_info"]["mistral.context_length"] == DEMO_CONTEXT
    assert show["model_info"]["general.parameter_count"] == 1_377_536
    assert "<|im_start|>" in show["template"]
    assert client.post("/api/show", json={"name": MODEL}).json() == show

    [running] = client.get("/api/ps").json()["models"]
    assert running["name"] == MODEL and running["context_length"] == DEMO_CONTEXT
    assert running["size_vram"] == 0 and running["details"] == details

    assert client.get("/api/version").json()["version"].count(".") == 2
    resp = client.post("/api/show", json={"model": "llama3.2"})
    assert resp.status_code == 404 and set(resp.json()) == {"error"}


@pytest.mark.parametrize(
    ("method", "path", "instead"),
    [
        ("POST", "/api/push", "registry"),
        ("POST", "/api/create", "/admin/models"),
        ("POST", "/api/copy", "GENAI_MODELS_FILE"),
    ],
)
def test_what_this_server_does_another_way_says_how(
    client: TestClient, method: str, path: str, instead: str
) -> None:
    resp = client.request(method, path, json={"model": "llama3.2"})
    assert resp.status_code == 400
    assert set(resp.json()) == {"error"} and instead in resp.json()["error"]


def test_an_unknown_api_path_is_a_404_in_ollamas_shape(client: TestClient) -> None:
    resp = client.get("/api/nope")
    assert resp.status_code == 404 and set(resp.json()) == {"error"}


@pytest.mark.parametrize("web_ui", [True, False])
def test_the_root_says_the_server_runs(web_ui: bool) -> None:
    with make_client(web_ui=web_ui) as client:
        assert client.head("/").status_code == 200
        page = client.get("/")
        assert page.status_code == 200
        if web_ui:
            assert "<html" in page.text.lower(), "the playground keeps /"
        else:
            assert page.text == "Ollama is running"


def test_the_api_key_is_asked_for_and_refused_in_ollamas_shape() -> None:
    with make_client(api_key="sekrit") as client:
        resp = client.get("/api/tags")
        assert resp.status_code == 401 and set(resp.json()) == {"error"}
        assert "API key" in resp.json()["error"]
        authorized = client.get("/api/tags", headers={"Authorization": "Bearer sekrit"})
        assert authorized.status_code == 200


@pytest.mark.parametrize(
    ("options", "openai"),
    [
        ({"repeat_penalty": 1.5}, {"repetition_penalty": 1.5}),
        (
            {"presence_penalty": 1.5, "frequency_penalty": 1.0},
            {"presence_penalty": 1.5, "frequency_penalty": 1.0},
        ),
        (
            {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "seed": 5},
            {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "seed": 5},
        ),
    ],
)
def test_sampling_options_do_what_the_openai_doors_fields_do(
    client: TestClient, options: dict[str, Any], openai: dict[str, Any]
) -> None:
    """Each option reaches the core as its OpenAI counterpart does: the same answer."""
    ask = [{"role": "user", "content": "go on and on"}]
    sampling = {"temperature": 0, **options, "num_predict": 24, "min_tokens": 24}
    ours = chat(client, messages=ask, options=sampling)["message"]["content"]
    body = {"messages": ask, "temperature": 0, **openai, "max_tokens": 24, "min_tokens": 24}
    theirs = client.post("/v1/chat/completions", json=body).json()
    assert ours == theirs["choices"][0]["message"]["content"]
    plain = {"temperature": 0, "num_predict": 24, "min_tokens": 24}
    assert ours != chat(client, messages=ask, options=plain)["message"]["content"], (
        "the option changed nothing on this prompt: the test would prove nothing"
    )
