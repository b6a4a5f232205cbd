"""Shared fixtures and the test tiers. API tests run the real app on the real demo model.

Every test module declares one tier with ``pytestmark``:
- ``unit``: no model, no subprocess (the whole tier runs in a few seconds);
- ``model``: the real demo model, in this process;
- ``live``: real server processes (``main_genai.py``), the benchmark's smoke run included.

``pytest -m unit`` runs the fast tier alone.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app_onnx_genai import create_app  # noqa: E402
from backends.models.folder import ModelFolder, inspect_model_folder  # noqa: E402
from config.settings import DEMO_MODEL_DIR, Settings  # noqa: E402
from tests import postgres as pg  # noqa: E402
from tests.hub_server import LocalHub, demo_repos  # noqa: E402
from tests.steps import Steps, installed  # noqa: E402

TIERS = ("unit", "model", "live")
# The demo model's context length (genai_config.json), which refusal messages name.
DEMO_CONTEXT = int(
    json.loads((DEMO_MODEL_DIR / "genai_config.json").read_text())["model"]["context_length"]
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test belongs to exactly one tier, so ``-m unit`` and friends select everything."""
    for item in items:
        tiers = [t for t in TIERS if item.get_closest_marker(t) is not None]
        if len(tiers) != 1:
            raise pytest.UsageError(f"{item.nodeid}: needs exactly one of {TIERS}, has {tiers}")


# The seed's metrics object, as /v1/chat, the stream's done event and the OpenAI ``metrics``
# field all carry it.
METRIC_KEYS = {
    "ttft",
    "total_latency",
    "tokens_per_second",
    "output_tokens_per_second",
    "input_tokens",
    "output_tokens",
    "tpot",
    "model",
}


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    return DEMO_MODEL_DIR


@pytest.fixture()
def hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, demo_model_dir: Path
) -> Iterator[LocalHub]:
    """The local hub (tests/hub_server.py), and this process pointed at it with an empty cache
    of its own."""
    with LocalHub(demo_repos(demo_model_dir)) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield served


def make_client(**overrides: Any) -> TestClient:
    settings = Settings.load(**{"model_dir": DEMO_MODEL_DIR, **overrides})
    return TestClient(create_app(settings))


def wait_loaded(client: TestClient, timeout: float = 60.0) -> dict[str, Any]:
    """Poll /healthz, as an orchestrator would, until no model is loading; its body."""
    deadline = time.monotonic() + timeout
    while True:
        health: dict[str, Any] = client.get("/healthz").json()
        if "loading" not in health["models"].values():
            return health
        assert time.monotonic() < deadline, f"the models did not load in {timeout} s: {health}"
        time.sleep(0.05)


def wait_ready(client: TestClient, timeout: float = 60.0) -> None:
    """Wait until every model loaded, and fail if one did not (the log says why)."""
    health = wait_loaded(client, timeout)
    assert set(health["models"].values()) == {"ok"}, f"a model failed to load: {health}"


@pytest.fixture()
def steps() -> Iterator[Steps]:
    """The models this test loads take a step only when it grants one (tests/steps.py)."""
    with installed(held=True) as held:
        yield held


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    with make_client() as c:
        wait_ready(c)
        yield c


def og_max_length(model_dir: Path, needed: int) -> int:
    """``needed``, or a sliding-window model's window if larger (og.Generator refuses a KV cache
    smaller than the window: "KV cache capacity (N) must be at least local_window_size"). The
    loops that use it stop after their own number of tokens."""
    return _folder(model_dir).kv_capacity(needed)


@functools.lru_cache
def _folder(model_dir: Path) -> ModelFolder:
    return inspect_model_folder(model_dir)


class DirectGenerator:
    """The oracle: a plain og.Generator loop on the same model, outside the server."""

    def __init__(self, model_dir: Path) -> None:
        import onnxruntime_genai as og

        self.og = og
        self.model = og.Model(str(model_dir))
        self.tokenizer = og.Tokenizer(self.model)
        self.model_dir = model_dir

    def max_length(self, needed: int) -> int:
        """og's ``max_length`` for ``needed`` tokens: see :func:`og_max_length`."""
        return og_max_length(self.model_dir, needed)

    def chat_prompt(self, messages: list[dict[str, str]]) -> str:
        return str(
            self.tokenizer.apply_chat_template(json.dumps(messages), add_generation_prompt=True)
        )

    def greedy(
        self, prompt: str | Sequence[int], max_new_tokens: int, min_new_tokens: int = 0
    ) -> tuple[str, list[int]]:
        """Greedy tokens up to EOS or ``max_new_tokens`` after ``prompt`` (a text, or its token
        ids); EOS is masked for the first ``min_new_tokens`` (og's ``min_length``), as a
        request's ``min_tokens`` does."""
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        else:
            ids = np.asarray(prompt, dtype=np.int32)
        params = self.og.GeneratorParams(self.model)
        params.set_search_options(
            max_length=self.max_length(len(ids) + max_new_tokens),
            min_length=len(ids) + min_new_tokens,
            do_sample=False,
        )
        gen = self.og.Generator(self.model, params)
        gen.append_tokens(ids)
        stream = self.tokenizer.create_stream()
        eos = set(self.tokenizer.eos_token_ids)
        text, tokens = "", list[int]()
        while len(tokens) < max_new_tokens and not gen.is_done():
            gen.generate_next_token()
            tok = int(gen.get_next_tokens()[0])
            if tok in eos:
                break
            tokens.append(tok)
            text += stream.decode(tok)
        return text, tokens


@pytest.fixture(scope="session")
def oracle(demo_model_dir: Path) -> DirectGenerator:
    return DirectGenerator(demo_model_dir)


def parse_sse(lines: Iterator[str]) -> list[str]:
    """The ``data:`` payloads of an SSE stream, in order (comments and blanks skipped)."""
    payloads, buf = [], []
    for line in lines:
        if line.startswith("data:"):
            buf.append(line[5:].removeprefix(" "))
        elif line == "" and buf:
            payloads.append("\n".join(buf))
            buf = []
    if buf:
        payloads.append("\n".join(buf))
    return payloads


def assert_error(resp: Any, status: int, param: str | None = None) -> dict[str, Any]:
    """The one error shape, with this status (and this ``param``, if given)."""
    assert resp.status_code == status, resp.text
    err: dict[str, Any] = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"]
    if param is not None:
        assert err["param"] == param
    return err


def metric(text: str, name: str) -> float:
    """The sum of a Prometheus metric's samples in an exposition."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


@pytest.fixture(scope="session")
def postgres() -> Iterator[pg.PostgresServer]:
    """A real PostgreSQL server for the session (tests/postgres.py); the test is skipped,
    saying why, where none can be started."""
    reason = pg.missing()
    if reason is not None:
        pytest.skip(reason)
    with pg.postgres_server() as server:
        yield server
