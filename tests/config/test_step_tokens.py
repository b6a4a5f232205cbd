"""The step token budget's and the overlapped prefill's defaults are one figure each: the
server setting's and the core's."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.config import ModelConfig
from config.settings import Settings

pytestmark = pytest.mark.unit


def test_the_setting_and_the_core_share_the_default() -> None:
    assert Settings.load().model.step_tokens == ModelConfig(Path("m")).step_tokens == 0
    assert Settings.load(step_tokens=32).model.step_tokens == 32
    assert Settings.load().model.prefill_overlap == ModelConfig(Path("m")).prefill_overlap
    assert Settings.load(prefill_overlap=False).model.prefill_overlap is False
