"""/v1/models through the real app: the served model's card, an unknown model, and requests
while the model is still loading."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from app_onnx_genai import create_app
from backends.config import ModelConfig, service_config
from backends.core.service import InferenceService
from backends.errors import StartupError
from backends.models.loader import LoadedModel
from config.models_file import model_fields
from config.settings import DEMO_MODEL_DIR, Settings
from tests.conftest import DEMO_CONTEXT, assert_error
from tests.routes.openai.helpers import MESSAGES, PROMPT

pytestmark = pytest.mark.model


def test_models_list_and_get(client: TestClient) -> None:
    listing = client.get("/v1/models").json()
    assert listing["object"] == "list"
    [card] = listing["data"]
    assert card["id"] == "onnx-genai" and card["object"] == "model"
    assert card["max_model_len"] == card["context_length"] == DEMO_CONTEXT
    assert client.get("/v1/models/onnx-genai").json() == card
    assert assert_error(client.get("/v1/models/gpt-9"), 404)["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": MESSAGES, "model": "gpt-9"}),
        ("/v1/completions", {"prompt": PROMPT, "model": "gpt-9"}),
    ],
)
def test_unknown_model_is_a_404(client: TestClient, path, body) -> None:
    err = assert_error(client.post(path, json=body), 404, "model")
    assert err["code"] == "model_not_found"


def test_requests_while_loading_are_503() -> None:
    release = threading.Event()

    def slow_loader(cfg: ModelConfig) -> LoadedModel:
        release.wait(30)
        raise StartupError("stopped by the test")

    settings = Settings.load(model_dir=DEMO_MODEL_DIR)
    config = service_config(model_fields(settings.model), settings.server.limits())
    service = InferenceService(config, loader=slow_loader)
    with TestClient(create_app(settings, service)) as c:
        try:
            for path, body in (
                ("/v1/chat/completions", {"messages": MESSAGES}),
                ("/v1/completions", {"prompt": PROMPT, "stream": True}),
                ("/generate", {"prompt": PROMPT}),
            ):
                err = assert_error(c.post(path, json=body), 503)
                assert err["code"] == "model_not_ready"
            card = c.get("/v1/models").json()["data"][0]
            assert card["id"] == "onnx-genai" and card["max_model_len"] is None
        finally:
            release.set()
