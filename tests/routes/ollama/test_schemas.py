"""Ollama's request bodies: every field Ollama defines is either honoured, accepted as a
documented no-op, or refused by name with a 400 in Ollama's shape (through the app, over a
fake handle: no model)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.routes.fakes import FakeHandle, end, fake_app, said

pytestmark = pytest.mark.unit

ASK = [{"role": "user", "content": "Hi"}]


def post(path: str, **fields: Any) -> Any:
    body: dict[str, Any] = {"model": "onnx-genai", "stream": False, **fields}
    if path == "/api/chat":
        body.setdefault("messages", ASK)
    else:
        body.setdefault("prompt", "Once")
    return fake_app(FakeHandle([said("Hi"), end()])).post(path, json=body)


def refused(resp: Any, *fragments: str) -> str:
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert set(body) == {"error"} and isinstance(body["error"], str)
    for fragment in fragments:
        assert fragment in body["error"], body["error"]
    return str(body["error"])


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("typical_p", 0.7),
        ("tfs_z", 0.5),
        ("mirostat", 2),
        ("repeat_last_n", 64),
        ("penalize_newline", True),
    ],
)
@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
def test_options_this_server_cannot_honour_are_refused_by_name(
    path: str, option: str, value: Any
) -> None:
    refused(post(path, options={option: value}), f"options.{option}", "not supported")


@pytest.mark.parametrize(
    ("option", "off"),
    [("typical_p", 1.0), ("tfs_z", 1.0), ("mirostat", 0), ("repeat_last_n", -1)],
)
def test_those_options_at_the_value_that_turns_them_off_are_accepted(option: str, off: Any) -> None:
    assert post("/api/chat", options={option: off}).status_code == 200


@pytest.mark.parametrize(
    "options",
    [
        {"num_thread": 4, "num_gpu": 1, "main_gpu": 0, "num_batch": 512, "num_keep": 5},
        {"use_mmap": True, "use_mlock": False, "numa": False, "low_vram": False},
        {"f16_kv": True, "logits_all": False, "vocab_only": False, "embedding_only": False},
        {"mirostat_tau": 5.0, "mirostat_eta": 0.1, "draft_num_predict": 4},
        {"temperature": None, "top_k": None},  # null is unset
    ],
)
def test_options_that_tune_how_ollama_runs_a_model_are_accepted(options: dict[str, Any]) -> None:
    assert post("/api/chat", options=options).status_code == 200


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"no_such_option": 1}, "options.no_such_option"),
        ({"temperature": 3}, "options.temperature"),
        ({"top_p": 0}, "options.top_p"),
        ({"num_predict": 0}, "options.num_predict"),
        ({"seed": -5}, "options.seed"),
        ({"stop": [""]}, "options.stop"),
        ({"tool_choice": ""}, "options.tool_choice"),
        ({"min_p": 1.5}, "options.min_p"),
        ({"speculative": {"num_speculative_tokens": 99}}, "options.speculative"),
    ],
)
def test_bad_option_values_name_the_option(options: dict[str, Any], fragment: str) -> None:
    refused(post("/api/chat", options=options), fragment)


@pytest.mark.parametrize(
    ("fields", "fragments"),
    [
        ({"suffix": "return x"}, ("suffix", "fill-in-the-middle")),
        ({"template": "{{ .Prompt }}"}, ("template", "chat template")),
        ({"context": [1, 2, 3]}, ("context", "deprecated")),
        ({"raw": True, "images": ["aGVsbG8="]}, ("images", "raw")),
        ({"raw": True, "system": "Be brief."}, ("system", "raw")),
        ({"truncate": True}, ("truncate", "never cut")),
        ({"shift": True}, ("shift",)),
        ({"format": "xml"}, ("format",)),
        ({"think": "extreme"}, ("think",)),
        ({"keep_alive": "five minutes"}, ("keep_alive", "duration")),
        ({"top_logprobs": 21}, ("top_logprobs",)),
    ],
)
def test_generate_refuses_what_it_cannot_do_by_name(
    fields: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    refused(post("/api/generate", **fields), *fragments)


def test_generate_accepts_the_empty_values_clients_send() -> None:
    resp = post("/api/generate", suffix="", template="", context=[], images=[], format="")
    assert resp.status_code == 200, resp.text


@pytest.mark.parametrize(
    ("message", "fragments"),
    [
        ({"role": "user", "content": "x", "images": [5]}, ("messages.0.images.0",)),
        ({"role": "robot", "content": "x"}, ("messages.0.role",)),
        ({"role": "user", "content": 5}, ("messages.0.content",)),
        ({"role": "user", "content": "x", "extra": 1}, ("messages.0.extra",)),
    ],
)
def test_chat_refuses_bad_messages_by_name(
    message: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    refused(post("/api/chat", messages=[message]), *fragments)


def test_roles_are_read_case_blind_as_ollama_reads_them() -> None:
    assert post("/api/chat", messages=[{"role": "User", "content": "x"}]).status_code == 200


@pytest.mark.parametrize("keep_alive", ["5m", "1h30m", "-1", "0", 0, -1, 300.5])
def test_keep_alive_is_accepted_as_ollama_writes_it(keep_alive: Any) -> None:
    assert post("/api/chat", keep_alive=keep_alive).status_code == 200


def test_a_missing_model_and_a_body_that_is_not_json_are_400s_in_ollamas_shape() -> None:
    app = fake_app(FakeHandle([said("Hi"), end()]))
    refused(app.post("/api/chat", json={"messages": ASK}), "model")
    resp = app.post("/api/chat", content=b"{not json", headers={"content-type": "application/json"})
    refused(resp, "JSON")
    refused(app.post("/api/show", json={}), "model")


@pytest.mark.parametrize(
    "headers",
    [
        {},  # httpx sends no content type for bytes, as LiteLLM does
        {"content-type": "application/x-www-form-urlencoded"},  # curl -d, Ollama's examples
        {"content-type": "text/plain"},
    ],
)
def test_a_body_is_read_as_json_whatever_its_content_type_as_ollama_reads_it(
    headers: dict[str, str],
) -> None:
    app = fake_app(FakeHandle([said("Hi"), end()]))
    body = b'{"model": "onnx-genai", "messages": [{"role": "user", "content": "Hi"}]}'
    resp = app.post("/api/chat", content=body, headers=headers)
    assert resp.status_code == 200, resp.text
    assert resp.text.splitlines()[-1].startswith('{"model"')
