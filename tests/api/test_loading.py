"""/healthz and requests while the model is loading or after it failed to load."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from app_onnx_genai import create_app
from backends.errors import StartupError
from backends.runtime import LoadedModel, RuntimeConfig
from backends.scheduler import Scheduler
from backends.service import InferenceService
from schemas.settings import DEMO_MODEL_DIR, Settings

BODY = {"messages": [{"role": "user", "content": "hi"}]}


def app_with_loader(loader) -> TestClient:
    settings = Settings(model_dir=DEMO_MODEL_DIR)
    config = settings.service_config()
    service = InferenceService(config, Scheduler(config.runtime, loader=loader))
    return TestClient(create_app(settings, service))


def test_healthz_is_503_loading_until_the_model_is_ready() -> None:
    release = threading.Event()

    def slow_loader(cfg: RuntimeConfig) -> LoadedModel:
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
    def failing_loader(cfg: RuntimeConfig) -> LoadedModel:
        raise StartupError("broken model")

    with app_with_loader(failing_loader) as client:
        client.app.state.service.scheduler.loaded.wait(10)  # type: ignore[attr-defined]
        resp = client.get("/healthz")
        assert resp.status_code == 503
        assert resp.json()["status"] == "error"
        assert client.post("/v1/chat", json=BODY).status_code == 503
