"""Every variable docs/configuration.md documents, and its flag, still sets the setting it
names: the field called as the variable is (less ``GENAI_``), and nothing else. The list is read
off the doc's table, so a newly documented variable is checked too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import pytest
from pydantic.fields import FieldInfo

from config.cli import parse_args
from config.settings import PARTS, REPO_ROOT, Settings

pytestmark = pytest.mark.unit

# The first cell of each table row: `GENAI_X` (`--x`), or several, `A` / `B` (`--a` / `--b`).
CELLS = re.findall(r"^\| (`[^|]*)\|", (REPO_ROOT / "docs" / "configuration.md").read_text(), re.M)
DOCUMENTED = [v for cell in CELLS for v in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)]
DOCUMENTED_FLAGS = [f for cell in CELLS for f in re.findall(r"`(--[a-z0-9-]+)`", cell)]
FIELDS: dict[str, FieldInfo] = {n: f for part in PARTS for n, f in part.model_fields.items()}
# Values a field's type alone does not give: one that passes its own check.
SPECIAL = {"kv_events_endpoint": "tcp://*:5557", "pod_ip": "10.0.0.7", "prompt_lookup_min": "3"}


@pytest.fixture(autouse=True)
def _no_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def another_value(name: str, field: FieldInfo) -> str:
    """A valid value, as the environment gives it, that is not the default."""
    if name in SPECIAL:
        return SPECIAL[name]
    default = field.get_default(call_default_factory=True)
    annotation = field.annotation
    kinds = [
        get_args(k)[0] if get_origin(k) is Annotated else k
        for k in ([annotation] if get_origin(annotation) is Literal else get_args(annotation))
    ] or [annotation]
    choices = [
        str(c) for k in kinds if get_origin(k) is Literal for c in get_args(k) if c != default
    ]
    if bool in kinds:
        return "false" if default in (True, "auto") else "true"
    if choices:
        return choices[0]
    if int in kinds or float in kinds:
        return str(int(default if isinstance(default, int | float) else 0) + 1)
    return "elsewhere"


def changed(settings: Settings, default: Settings) -> dict[str, Any]:
    return {
        name: getattr(part, name)
        for key in ("model", "server")
        for part in [getattr(settings, key)]
        for name in type(part).model_fields
        if getattr(part, name) != getattr(getattr(default, key), name)
    }


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_the_table_is_read() -> None:
    assert {"GENAI_MODEL_DIR", "HOST", "PORT", "GENAI_PROFILE_MAX_FILES"} <= set(DOCUMENTED)
    assert {"--model-dir", "--port", "--no-web-ui"} <= set(DOCUMENTED_FLAGS)


@pytest.mark.parametrize("flag", DOCUMENTED_FLAGS)
def test_a_documented_flag_is_a_documented_variable_s(flag: str) -> None:
    named = {flag_of(v.lower().removeprefix("genai_")) for v in DOCUMENTED}
    assert flag in named or flag.replace("--no-", "--", 1) in named


@pytest.mark.parametrize("variable", DOCUMENTED)
def test_a_documented_variable_and_its_flag_set_their_setting(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    name = variable.lower().removeprefix("genai_")
    assert name in FIELDS, f"{variable} sets no setting"
    flag = flag_of(name)
    value = another_value(name, FIELDS[name])
    default = Settings.load()
    switch = FIELDS[name].annotation is bool  # --flag / --no-flag, no value
    argv = [flag if value == "true" else "--no-" + flag[2:]] if switch else [flag, value]
    by_flag = changed(Settings.load(**parse_args(argv)), default)
    monkeypatch.setenv(variable, value)
    by_variable = changed(Settings.load(), default)
    assert list(by_variable) == [name]
    assert by_flag == by_variable
