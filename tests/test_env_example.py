""".env.example must list every setting (and nothing that is not one)."""

from __future__ import annotations

import re

from schemas.settings import REPO_ROOT, Settings


def test_env_example_lists_every_setting() -> None:
    text = (REPO_ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, flags=re.M))
    names = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        names.add(alias.choices[0])  # type: ignore[union-attr]
    assert listed == names
