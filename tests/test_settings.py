from __future__ import annotations

import pytest
from pydantic import ValidationError

from schemas.settings import DEMO_MODEL_DIR, Settings


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    s = Settings()
    assert s.model_dir == DEMO_MODEL_DIR
    assert (s.host, s.port, s.device, s.model_name) == ("127.0.0.1", 8002, "auto", "onnx-genai")
    assert s.workers == 1 and s.reload is False


def test_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GENAI_DEVICE", "DML")
    monkeypatch.setenv("PORT", "9000")
    monkeypatch.setenv("GENAI_MAX_LENGTH", "512")
    monkeypatch.setenv("WORKERS", "3")
    s = Settings()
    assert (s.device, s.port, s.max_length, s.workers) == ("directml", 9000, 512, 3)


def test_dotenv_file(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("GENAI_MODEL_NAME=my-model\nHOST=0.0.0.0\n")
    s = Settings()
    assert (s.model_name, s.host) == ("my-model", "0.0.0.0")


def test_reload_forces_one_worker(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD", "true")
    monkeypatch.setenv("WORKERS", "4")
    assert Settings().workers == 1


@pytest.mark.parametrize(
    ("var", "value"),
    [("GENAI_DEVICE", "tpu"), ("PORT", "0"), ("GENAI_MAX_LENGTH", "-1"), ("WORKERS", "zero")],
)
def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path, var, value) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(var, value)
    with pytest.raises(ValidationError):
        Settings()
