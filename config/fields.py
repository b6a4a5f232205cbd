"""What every setting shares: where it is read from, how a field names its environment
variable, and the paths the defaults point into."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field
from pydantic.fields import FieldInfo
from pydantic_settings import SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_MODEL_DIR = REPO_ROOT / "models" / "demo-llama"
ENV_FILE = ".env"

SETTINGS_CONFIG = SettingsConfigDict(
    env_file=ENV_FILE, env_file_encoding="utf-8", extra="ignore", populate_by_name=True
)


def split_csv(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def setting(default: Any, env: str, field: str, description: str, **kw: Any) -> Any:
    """A field read from ``env`` (or, when given by name, ``field``)."""
    return Field(
        default,
        validation_alias=AliasChoices(env, field),
        description=description,
        **kw,
    )


def env_name(field: FieldInfo) -> str:
    alias = field.validation_alias
    assert isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str)
    return alias.choices[0]
