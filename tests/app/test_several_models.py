"""Several models behind one server (GENAI_MODELS_FILE): each answers under its own name with
its own outputs, /v1/models lists them, metrics carry the model, and a model can be unloaded
and loaded again while another keeps serving."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.conftest import DirectGenerator, assert_error, make_client, wait_ready

pytestmark = pytest.mark.model

QWEN_DIR = REPO_ROOT / "tests" / "models" / "qwen2"
MESSAGES = [{"role": "user", "content": "Name three rivers."}]


def models_file(tmp_path: Path, text: str, suffix: str = ".toml") -> Path:
    path = tmp_path / f"models{suffix}"
    path.write_text(text)
    return path


TWO_MODELS = f"""
[[models]]
name = "demo"
path = "{DEMO_MODEL_DIR}"
scheduler = "generator"

[[models]]
name = "qwen"
path = "{QWEN_DIR}"
scheduler = "batch"
max_length = 512
"""


def wait_all(client: TestClient) -> None:
    wait_ready(client)  # every model in /healthz's map is "ok"


def chat(client: TestClient, model: str | None, **body: Any) -> dict[str, Any]:
    payload = {"messages": MESSAGES, "max_tokens": 12, "temperature": 0, **body}
    if model is not None:
        payload["model"] = model
    resp = client.post("/v1/chat/completions", json=payload)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = models_file(tmp_path_factory.mktemp("models"), TWO_MODELS)
    with make_client(models_file=path, admin=True, model_root=REPO_ROOT) as client:
        wait_all(client)
        yield client


def test_each_model_answers_as_its_own_oracle(two: TestClient) -> None:
    for name, folder in (("demo", DEMO_MODEL_DIR), ("qwen", QWEN_DIR)):
        oracle = DirectGenerator(folder)
        expected, _ = oracle.greedy(oracle.chat_prompt(MESSAGES), 12)
        body = chat(two, name)
        assert body["model"] == name
        assert body["choices"][0]["message"]["content"] == expected
    # No model named: the default, the first one listed.
    assert chat(two, None)["model"] == "demo"


def test_models_are_listed_and_unknown_names_are_a_404_listing_them(two: TestClient) -> None:
    cards = two.get("/v1/models").json()["data"]
    assert [c["id"] for c in cards] == ["demo", "qwen"]
    assert cards[1]["max_model_len"] == 512 and cards[1]["parent"] is None
    assert two.get("/v1/models/qwen").json()["id"] == "qwen"
    err = assert_error(
        two.post("/v1/chat/completions", json={"model": "nope", "messages": MESSAGES}), 404, "model"
    )
    assert "'demo'" in err["message"] and "'qwen'" in err["message"]
    assert two.get("/v1/models/nope").status_code == 404


def test_health_reports_every_model(two: TestClient) -> None:
    health = two.get("/healthz").json()
    assert health["status"] == "ok" and health["models"] == {"demo": "ok", "qwen": "ok"}
    assert "model_dir" not in health  # no path on the open route (a keyed caller's is there)


def test_metrics_carry_the_model(two: TestClient) -> None:
    chat(two, "qwen")
    text = two.get("/metrics").text
    assert 'genai_requests_finished_total{model="qwen",reason="length"}' in text
    assert 'genai_requests_running{model="demo"}' in text


def test_unload_and_load_again_while_another_model_serves(two: TestClient) -> None:
    streamed: list[str] = []
    started = threading.Event()

    def long_stream() -> None:
        body = {"model": "demo", "messages": MESSAGES, "max_tokens": 1900, "min_tokens": 1900}
        with two.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
            for line in r.iter_lines():
                started.set()
                if line.startswith("data:"):
                    streamed.append(line)

    other = threading.Thread(target=long_stream)
    other.start()
    assert started.wait(30)
    gone = two.delete("/admin/models/qwen")
    assert gone.status_code == 200
    assert gone.json() == {"id": "qwen", "unloaded": True, "cancelled": 0}
    assert_error(
        two.post("/v1/chat/completions", json={"model": "qwen", "messages": MESSAGES}), 404
    )
    assert [c["id"] for c in two.get("/v1/models").json()["data"]] == ["demo"]
    again = {"name": "qwen", "path": str(QWEN_DIR), "max_length": 512}
    back = two.post("/admin/models", json=again)
    assert back.status_code == 200, back.text
    assert back.json()["status"] == "ok" and back.json()["max_model_len"] == 512
    assert chat(two, "qwen")["model"] == "qwen"
    other.join(60)
    # The other model's stream, begun before the unload, went on to its end.
    assert streamed[-1] == "data: [DONE]"
    finish = json.loads(streamed[-2][len("data: ") :])["choices"][0]["finish_reason"]
    assert finish == "length"  # all 1,900 tokens: not cut off


def test_admin_load_refuses_a_taken_name_and_a_bad_folder(two: TestClient, tmp_path: Path) -> None:
    assert_error(
        two.post("/admin/models", json={"name": "demo", "path": str(DEMO_MODEL_DIR)}), 400, "name"
    )
    # Outside the model root (REPO_ROOT): the one answer for every refused path.
    err = assert_error(
        two.post("/admin/models", json={"name": "x", "path": str(tmp_path)}), 400, "path"
    )
    assert "GENAI_MODEL_ROOT" in err["message"]
    assert [c["id"] for c in two.get("/v1/models").json()["data"]] == ["demo", "qwen"]
    assert_error(two.delete("/admin/models/nope"), 404, "model")


def test_the_last_model_cannot_be_unloaded() -> None:
    with make_client(admin=True) as client:
        wait_ready(client)
        assert_error(client.delete("/admin/models/onnx-genai"), 400, "name")
