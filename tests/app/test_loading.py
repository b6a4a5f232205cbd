"""/healthz and requests while the model is loading or after it failed to load."""

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
from tests.conftest import wait_loaded

pytestmark = pytest.mark.model

BODY = {"messages": [{"role": "user", "content": "hi"}]}


def app_with_loader(loader) -> TestClient:
    settings = Settings.load(model_dir=DEMO_MODEL_DIR)
    config = service_config(model_fields(settings.model), settings.server.limits())
    service = InferenceService(config, loader=loader)
    return TestClient(create_app(settings, service))


def test_healthz_is_503_loading_until_the_model_is_ready() -> None:
    release = threading.Event()

    def slow_loader(cfg: ModelConfig) -> LoadedModel:
        release.wait(30)
        raise StartupError("stopped by the test")

    with app_with_loader(slow_loader) as client:
        resp = client.get("/healthz")
        assert resp.status_code == 503
        assert resp.json()["status"] == "loading"
        assert resp.json()["backend"] == "onnx-genai"
        chat = client.post("/v1/chat", json=BODY)
        assert chat.status_code == 503
        assert chat.json()["error"]["code"] == "model_not_ready"
        release.set()


def test_healthz_is_503_error_when_loading_failed() -> None:
    def failing_loader(cfg: ModelConfig) -> LoadedModel:
        raise StartupError("broken model")

    with app_with_loader(failing_loader) as client:
        wait_loaded(client, 10)
        resp = client.get("/healthz")
        assert resp.status_code == 503
        assert resp.json()["status"] == "error"
        assert client.post("/v1/chat", json=BODY).status_code == 503
