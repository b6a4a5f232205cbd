""".env.example and docs/configuration.md's settings table list every setting (and nothing else)."""

from __future__ import annotations

import re

import pytest

from config.settings import REPO_ROOT, env_names

pytestmark = pytest.mark.unit


def test_env_example_lists_every_setting_once() -> None:
    text = (REPO_ROOT / ".env.example").read_text()
    listed = re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, flags=re.M)
    assert sorted(listed) == sorted(env_names())


def test_readme_documents_every_setting() -> None:
    readme = (REPO_ROOT / "docs" / "configuration.md").read_text()
    missing = [name for name in env_names() if f"`{name}`" not in readme]
    assert not missing, f"docs/configuration.md's settings table lacks {missing}"
