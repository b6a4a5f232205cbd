"""The README's two commands may run at the same time on a fresh clone: their installs into
.venv take turns (scripts/ensure_venv.py) instead of creating it at once."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config.settings import REPO_ROOT

pytestmark = pytest.mark.live


def test_two_installs_at_once_take_turns(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO_ROOT / "scripts" / "ensure_venv.py", tmp_path / "scripts")
    for name in ("serve-reqs.txt", "test-reqs.txt"):
        (tmp_path / name).write_text("# nothing to install: this test is about the venv\n")
    script = str(tmp_path / "scripts" / "ensure_venv.py")
    runs = [
        subprocess.Popen(
            [sys.executable, script, reqs],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for reqs in ("serve-reqs.txt", "test-reqs.txt")
    ]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert sum("creating .venv" in out for out in outputs) == 1, outputs
    assert any("waiting for another script" in out for out in outputs), outputs
    pip = subprocess.run(
        [str(tmp_path / ".venv" / "bin" / "python"), "-m", "pip", "--version"],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr
