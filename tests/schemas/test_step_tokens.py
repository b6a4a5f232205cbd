"""The step token budget's default is one figure: the server setting's and the core's."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.config import ModelConfig
from schemas.settings import STEP_TOKENS_DEFAULT, Settings

pytestmark = pytest.mark.unit


def test_the_setting_and_the_core_share_the_default() -> None:
    assert ModelConfig(Path("m")).step_tokens == STEP_TOKENS_DEFAULT
    assert Settings.load(step_tokens=32).model.step_tokens == 32
