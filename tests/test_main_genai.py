"""The launcher's settings errors: every one is a single line, built from the settings' names
and the checks' own words, never from the value given (an API key, a DSN's password)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_core import ErrorDetails

from backends.errors import StartupError
from main_genai import _problem, load_settings
from tests.leaks import assert_not_leaked

pytestmark = pytest.mark.unit

KEY = "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a99"  # as `openssl rand -hex 16` makes them
PASSWORD = "Pw-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def _no_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def refusal(**overrides: Any) -> str:
    with pytest.raises(StartupError) as caught:
        load_settings(overrides)
    message = str(caught.value)
    assert message.startswith("Invalid settings: ") and "\n" not in message
    assert "input_value" not in message and "Value error" not in message
    assert_not_leaked(message, KEY, PASSWORD)
    return message


def test_a_check_across_settings_is_one_line_without_the_values() -> None:
    message = refusal(workers=2, kv_events_endpoint="tcp://*:5557", api_key=KEY)
    assert message == (
        "Invalid settings: GENAI_KV_EVENTS_ENDPOINT needs WORKERS=1: each worker holds its own "
        "KV cache, and the endpoint picker would see them as one pod"
    )


def test_a_field_error_names_the_setting_and_not_its_secret() -> None:
    message = refusal(responses_db=f"postgresql+psycopg://app:{PASSWORD}@db/genai", api_key=KEY)
    assert message.startswith("Invalid settings: GENAI_RESPONSES_DB / --responses-db: ")
    assert "write postgresql://" in message


def test_several_errors_are_one_line() -> None:
    message = refusal(port="x", responses_db=f"postgresql://app:{PASSWORD} @db/g", api_key=KEY)
    assert "PORT / --port: " in message and "; GENAI_RESPONSES_DB / --responses-db: " in message


def test_a_message_that_quotes_a_secret_has_it_starred() -> None:
    # No check of ours quotes a secret; one that someday does must not print it.
    field: ErrorDetails = {
        "type": "value_error",
        "loc": ("GENAI_API_KEY",),
        "msg": f"Value error, {KEY} is too weak",
        "input": f"other, {KEY}",
    }
    assert _problem(field) == "GENAI_API_KEY / --api-key: *** is too weak"
    across: ErrorDetails = {
        "type": "value_error",
        "loc": (),
        "msg": f"Value error, cannot reach {PASSWORD}@db",
        "input": {"GENAI_RESPONSES_DB": f"postgresql://app:{PASSWORD}@db/g", "WORKERS": "2"},
    }
    assert _problem(across) == "cannot reach ***@db"
