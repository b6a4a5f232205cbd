"""The README's quick-start curls, as written there, against a live server on the demo model:
on this machine's int4 kernels, on its other int4 kernel path, and with its logits moved by the
documented difference between CPU kinds' kernels (tests/kernel_variants.py). Each answers, and
the chat turn ends within its ``max_tokens``, however the near-ties inside it fall."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness.server import ServerProcess, live_server
from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.kernel_variants import NOISE, other_kernels

pytestmark = pytest.mark.live

README_URL = "http://127.0.0.1:8002"


def readme_curls() -> list[str]:
    """The curl commands of the README's quick start (a command and its continued lines)."""
    text = (REPO_ROOT / "README.md").read_text()
    commands = re.findall(r"^curl .*?(?<!\\)$", text, flags=re.M | re.S)
    return [c.replace("\\\n", " ") for c in commands]


def test_the_readme_has_its_three_curls() -> None:
    paths = [re.search(r"8002(/\S*)", c).group(1) for c in readme_curls()]  # type: ignore[union-attr]
    assert paths == ["/healthz", "/v1/chat", "/v1/chat/stream"]


@pytest.fixture(scope="module", params=["own", "other-kernels", "noise"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    env = {"GENAI_MODEL_DIR": str(DEMO_MODEL_DIR)}
    if request.param == "other-kernels":
        folder: Path = tmp_path_factory.mktemp("other-kernels") / "model"
        env["GENAI_MODEL_DIR"] = str(other_kernels(DEMO_MODEL_DIR, folder))
    elif request.param == "noise":
        env["GENAI_LOGIT_NOISE"] = str(NOISE)
    with live_server(env=env, timeout=120) as live:
        yield live


def curl(server: ServerProcess, command: str) -> str:
    done = subprocess.run(
        ["bash", "-c", command.replace(README_URL, server.url)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_readme_curls_answer_and_the_turn_ends(server: ServerProcess) -> None:
    health, chat, stream = (curl(server, c) for c in readme_curls())
    assert json.loads(health)["status"] == "ok"
    answer = json.loads(chat)
    max_tokens = 32  # the README's request
    assert answer["content"].strip(), answer
    assert answer["metrics"]["output_tokens"] < max_tokens, answer  # it ended its turn
    events = [
        line.removeprefix("data: ") for line in stream.splitlines() if line.startswith("data:")
    ]
    assert events and any(e.strip() and e.strip() != "[DONE]" for e in events), stream
