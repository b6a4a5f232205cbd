"""Settings in two parts, their environment names, the command line derived from them, and
the lists of allowed values that must agree with the backend's."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_args, get_type_hints

import pytest
from pydantic import TypeAdapter, ValidationError

from backends.config import Device, Limits, ModelConfig
from backends.models.providers import PROVIDERS
from config.cli import build_parser, parse_args
from config.settings import (
    DEMO_MODEL_DIR,
    SETTING_OF,
    ModelSettings,
    ServerSettings,
    Settings,
    env_names,
    unknown_env_names,
)

pytestmark = pytest.mark.unit

SHOWN_ONLY = {"title", "description", "default"}


@pytest.fixture(autouse=True)
def _no_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here unless a test writes one


def test_defaults() -> None:
    s = Settings.load()
    assert s.model.model_dir == DEMO_MODEL_DIR
    assert (s.server.host, s.server.port, s.model.device, s.model.model_name) == (
        "127.0.0.1",
        8002,
        "auto",
        "onnx-genai",
    )
    assert s.server.workers == 1 and s.server.reload is False


def test_the_two_parts_split_the_settings() -> None:
    model = set(ModelSettings.model_fields)
    server = set(ServerSettings.model_fields)
    assert not model & server
    assert {"model_dir", "model_name", "device", "intra_op_threads", "max_length"} <= model
    assert {"scheduler", "cache_sequences"} <= model
    assert {"host", "port", "workers", "api_key", "cors_origins", "max_concurrency"} <= server
    assert len(env_names()) == len(set(env_names())) == len(model) + len(server)


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENAI_DEVICE", "DML")
    monkeypatch.setenv("PORT", "9000")
    monkeypatch.setenv("GENAI_MAX_LENGTH", "512")
    monkeypatch.setenv("WORKERS", "3")
    s = Settings.load()
    assert (s.model.device, s.server.port, s.model.max_length, s.server.workers) == (
        "directml",
        9000,
        512,
        3,
    )


def test_dotenv_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("GENAI_MODEL_NAME=my-model\nHOST=0.0.0.0\n")
    s = Settings.load()
    assert (s.model.model_name, s.server.host) == ("my-model", "0.0.0.0")


def test_fields_by_name_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "9000")
    monkeypatch.setenv("GENAI_SCHEDULER", "engine")
    s = Settings.load(port=9100, scheduler="generator")
    assert (s.server.port, s.model.scheduler) == (9100, "generator")
    with pytest.raises(TypeError, match="frobnicate"):
        Settings.load(frobnicate=1)


def test_reload_forces_one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELOAD", "true")
    monkeypatch.setenv("WORKERS", "4")
    assert Settings.load().server.workers == 1


@pytest.mark.parametrize(
    ("var", "value"),
    [("GENAI_DEVICE", "tpu"), ("PORT", "0"), ("GENAI_MAX_LENGTH", "-1"), ("WORKERS", "zero")],
)
def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch, var, value) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValidationError):
        Settings.load()


# ---- one list per set of allowed values --------------------------------------------------------
def test_devices_are_the_backend_providers() -> None:
    assert set(get_args(Device)) == {"auto", *PROVIDERS}


def test_model_settings_take_the_cores_types_bounds_and_defaults() -> None:
    hints = get_type_hints(ModelConfig, include_extras=True)
    properties = ModelSettings.model_json_schema(by_alias=False)["properties"]
    checked = []
    for core in dataclasses.fields(ModelConfig):
        name = SETTING_OF.get(core.name, core.name)
        if name not in properties or core.name == "path":
            continue  # set per model in the models file only; the path defaults to the demo
        assert ModelSettings.model_fields[name].default == core.default, name
        setting = {k: v for k, v in properties[name].items() if k not in SHOWN_ONLY}
        typed = TypeAdapter(hints[core.name]).json_schema()  # the values allowed, bounds too
        allowed = typed.get("anyOf", [])  # the core's type may also allow None (not a setting)
        assert (
            setting == typed
            or setting in allowed
            or all(kind in allowed for kind in setting.get("anyOf", [None]))
        ), name
        checked.append(name)
    assert len(checked) == len(ModelSettings.model_fields) - 2  # all but model_dir, models_file


def test_sampling_defaults_reach_the_cores_limits() -> None:
    assert Limits(**Settings.load().server.limits()).sampling_defaults == "model"
    api = Settings.load(sampling_defaults="api").server.limits()
    assert Limits(**api).sampling_defaults == "api"
    assert parse_args(["--sampling-defaults", "api"])["sampling_defaults"] == "api"
    with pytest.raises(ValidationError):
        Settings.load(sampling_defaults="hf")


def test_parser_names_are_the_registry_s() -> None:
    from backends.chat.parsers import reasoning_parser_names, tool_parser_names
    from backends.config import ReasoningParserName, ToolParserName

    assert set(get_args(ToolParserName)) == {"auto", "none", *tool_parser_names()}
    assert set(get_args(ReasoningParserName)) == {"auto", "none", *reasoning_parser_names()}


def test_seed_limit_is_the_backend_one() -> None:
    from backends.types import SEED_MAX as BACKEND_SEED_MAX
    from schemas.common import SEED_MAX

    assert SEED_MAX == BACKEND_SEED_MAX


def test_a_requests_speculation_bounds_are_the_settings() -> None:
    from backends import config
    from schemas import common

    assert common.SPECULATIVE_TOKENS_MAX == config.SPECULATIVE_TOKENS_MAX
    assert common.PROMPT_LOOKUP_LIMIT == config.PROMPT_LOOKUP_LIMIT


# ---- the command line --------------------------------------------------------------------------
def test_every_setting_has_a_flag_naming_its_env_and_default() -> None:
    text = build_parser().format_help()
    for name in env_names():
        assert f"[{name};" in text, name
    assert "--model-dir" in text and "--reload, --no-reload" in text
    assert "default: 8002" in text and "{auto,cpu,cuda," in text


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "9000")
    monkeypatch.setenv("GENAI_DEVICE", "cuda")
    given = parse_args(["--port", "9200", "--device", "cpu", "--no-reload"])
    assert given == {"port": "9200", "device": "cpu", "reload": False}
    s = Settings.load(**given)
    assert (s.server.port, s.model.device, s.server.reload) == (9200, "cpu", False)
    assert parse_args([]) == {}  # absent flags leave the environment alone


def test_unknown_flags_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--devise", "cpu"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --devise" in capsys.readouterr().err


def test_help_exits_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--help"])
    assert exc.value.code == 0
    assert "usage: main_genai.py" in capsys.readouterr().out


# ---- misspelled variables ----------------------------------------------------------------------
def test_unknown_genai_variables_name_the_closest_setting(tmp_path: Path) -> None:
    env = {
        "GENAI_DEVCE": "cuda",
        "GENAI_DEVICE": "cpu",
        "PATH": "/bin",
        "GENAI_XYZZY_PLUGH_QUUX": "1",
    }
    (tmp_path / ".env").write_text("GENAI_MAX_LENGHT=512\nHOST=0.0.0.0\n")
    assert unknown_env_names(env) == [
        ("GENAI_DEVCE", "GENAI_DEVICE"),
        ("GENAI_MAX_LENGHT", "GENAI_MAX_LENGTH"),
        ("GENAI_XYZZY_PLUGH_QUUX", None),
    ]


@pytest.mark.parametrize("key", ["", " ", ",", " , ,"])
def test_a_blank_api_key_is_refused(key: str) -> None:
    with pytest.raises(ValidationError, match="holds no key"):
        Settings.load(api_key=key)


def test_api_keys_and_the_admin_switch() -> None:
    assert Settings.load(api_key=" a, b ,").server.api_keys == ["a", "b"]
    assert Settings.load().server.admin_enabled is False
    assert Settings.load(api_key="a").server.admin_enabled is True
    assert Settings.load(admin=True).server.admin_enabled is True
    assert Settings.load(api_key="a", admin=False).server.admin_enabled is False
    admin = Settings.load(admin_api_key="x, y").server
    assert admin.admin_keys == ["x", "y"] and admin.api_keys == [] and admin.admin_enabled
    with pytest.raises(ValidationError):
        Settings.load(admin_api_key=" , ")  # a blank key must not mean "no admin key"
