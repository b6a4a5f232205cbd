"""Load on first use, unload when idle (issue 45, item 2): three copies of the demo model under
a cap of two (GENAI_MAX_MODELS=2), with requests that force every case in turn: a cold load
that concurrent first requests wait on, eviction of the least recently used idle model, busy
models that are never evicted (the third waits for one to go idle), Ollama's keep_alive 0 and
-1, and a per-model keep-alive that runs out. No request fails, no model is ever loaded twice
at once, and never more than two are in memory. ``pytest -s`` prints the timeline."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR
from tests.conftest import make_client
from tests.steps import Steps, installed

pytestmark = pytest.mark.model

MODELS = f"""
[[models]]
name = "a"
path = "{DEMO_MODEL_DIR}"
scheduler = "generator"
load = "first_use"

[[models]]
name = "b"
path = "{DEMO_MODEL_DIR}"
scheduler = "generator"
load = "first_use"

[[models]]
name = "c"
path = "{DEMO_MODEL_DIR}"
scheduler = "generator"
load = "first_use"
keep_loaded = 1.5
"""
EVENT = re.compile(r"model '(\w+)' (loading|loaded|unloaded)(?: \((\w+))?")


class Timeline(logging.Handler):
    """The registry's load and unload lines, timed from the test's start."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.start = time.monotonic()
        self.events: list[tuple[float, str, str, str]] = []  # (t, model, what, why)

    def emit(self, record: logging.LogRecord) -> None:
        found = EVENT.match(record.getMessage())
        if found:
            model, what, why = found.groups()
            self.events.append((time.monotonic() - self.start, model, what, why or ""))

    def mark(self, note: str) -> None:
        self.events.append((time.monotonic() - self.start, "-", note, ""))

    def of(self, model: str) -> list[str]:
        return [what for _, m, what, _ in self.events if m == model]

    def printed(self) -> str:
        return "\n".join(
            f"{t:7.2f}s  {m:>2}  {what}{f' ({why})' if why else ''}"
            for t, m, what, why in self.events
        )


@pytest.fixture(scope="module")
def timeline() -> Iterator[Timeline]:
    handler = Timeline()
    logger = logging.getLogger("genai.registry")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old)


@pytest.fixture(scope="module")
def steps() -> Iterator[Steps]:
    """The models step freely, but where the test paces them (tests/steps.py)."""
    with installed(held=False) as free:
        yield free


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, timeline: Timeline, steps: Steps
) -> Iterator[TestClient]:
    path = Path(tmp_path_factory.mktemp("models")) / "models.toml"
    path.write_text(MODELS)
    with make_client(models_file=path, max_models=2) as c:
        yield c


def chat(client: TestClient, model: str, **body: Any) -> dict[str, Any]:
    payload = {
        "model": model,
        "messages": [{"role": "user", "content": "Hello!"}],
        "max_tokens": 8,
        "temperature": 0,
        **body,
    }
    resp = client.post("/v1/chat/completions", json=payload)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def ollama(client: TestClient, model: str, keep_alive: Any) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Hello!"}],
        "stream": False,
        "options": {"temperature": 0, "num_predict": 8},
        "keep_alive": keep_alive,
    }
    resp = client.post("/api/chat", json=body)
    assert resp.status_code == 200, resp.text


def in_memory(client: TestClient) -> set[str]:
    return {m["name"] for m in client.get("/api/ps").json()["models"]}


def listed(client: TestClient) -> dict[str, bool]:
    return {m["id"]: m["loaded"] for m in client.get("/v1/models").json()["data"]}


def at_once(client: TestClient, work: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """``chat`` for each (model, body) from its own thread, all started together."""
    results: list[dict[str, Any] | BaseException] = [RuntimeError("not run")] * len(work)

    def run(i: int, model: str, body: dict[str, Any]) -> None:
        try:
            results[i] = chat(client, model, **body)
        except BaseException as exc:  # reported below, with the others
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, *w)) for i, w in enumerate(work)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert not failed, failed
    return [r for r in results if not isinstance(r, BaseException)]


def wait_until(what: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def metric(client: TestClient, name: str, **labels: str) -> float:
    text = client.get("/metrics").text
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and all(part in line for part in want.split(",")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_three_models_under_a_cap_of_two(
    client: TestClient, timeline: Timeline, steps: Steps
) -> None:
    health = client.get("/healthz")
    assert health.status_code == 200, health.text  # nothing loaded, and ready to serve
    assert health.json()["models"] == {"a": "unloaded", "b": "unloaded", "c": "unloaded"}
    assert listed(client) == {"a": False, "b": False, "c": False}
    assert in_memory(client) == set()

    # A cold load, four first requests at once: one load, all four answered.
    timeline.mark("4 requests for a at once")
    at_once(client, [("a", {})] * 4)
    assert timeline.of("a") == ["loading", "loaded"]
    timeline.mark("b")
    chat(client, "b")
    assert in_memory(client) == {"a", "b"}
    assert listed(client) == {"a": True, "b": True, "c": False}

    # At the cap, c evicts the least recently used idle model: a.
    timeline.mark("c (a is the least recently used)")
    chat(client, "c")
    assert in_memory(client) == {"b", "c"}
    assert timeline.of("a")[-1] == "unloaded"

    # b and c both busy: a waits until one of them is idle, and neither is cut short.
    timeline.mark("long on b and c, then a")
    long = {"max_tokens": 160, "min_tokens": 160}
    steps.hold()
    steps.pace(0.03)  # a step per 30 ms: both are still running when a asks, on any machine
    results: list[dict[str, Any]] = []
    runner = threading.Thread(
        target=lambda: results.extend(at_once(client, [("b", long), ("c", long)]))
    )
    runner.start()
    registry = client.app.state.models  # type: ignore[attr-defined]
    wait_until(lambda: {r.model for r in registry.stats().requests} == {"b", "c"})
    chat(client, "a")
    runner.join(120)
    steps.free()
    assert [r["usage"]["completion_tokens"] for r in results] == [160, 160], results
    assert all(r["choices"][0]["finish_reason"] == "length" for r in results)
    evicted = _evicted_last(timeline)
    assert evicted in ("b", "c") and "a" in in_memory(client)
    assert evicted not in in_memory(client)

    # Ollama's keep_alive: 0 unloads the model once its request ends.
    timeline.mark("a with keep_alive 0")
    ollama(client, "a", 0)
    wait_until(lambda: "a" not in in_memory(client))

    # -1 keeps c past its own keep-alive (1.5 s); a request without one gives it back.
    timeline.mark("c with keep_alive -1")
    ollama(client, "c", -1)
    expires = {m["name"]: m["expires_at"] for m in client.get("/api/ps").json()["models"]}
    assert expires["c"].startswith("9999")
    time.sleep(2.5)
    assert "c" in in_memory(client)
    timeline.mark("c without keep_alive (its own: 1.5 s)")
    chat(client, "c")
    assert "c" in in_memory(client)
    wait_until(lambda: "c" not in in_memory(client), timeout=5)
    timeline.mark("end")

    print("\nload/unload timeline (GENAI_MAX_MODELS=2):\n" + timeline.printed())
    _never_twice_and_never_over_the_cap(timeline)
    assert metric(client, "genai_model_loads_total", model="a") == 2
    assert metric(client, "genai_model_unloads_total", model="a", reason="evicted") >= 1
    assert metric(client, "genai_model_unloads_total", model="c", reason="idle") >= 1
    assert metric(client, "genai_model_load_seconds_count", model="a") == 2


def _evicted_last(timeline: Timeline) -> str:
    evicted = [m for _, m, what, why in timeline.events if what == "unloaded" and why == "evicted"]
    return evicted[-1]


def _never_twice_and_never_over_the_cap(timeline: Timeline) -> None:
    """Each model goes loading -> loaded -> unloaded in turn (never two loads of one at once),
    and at most two are in memory (loading counts) at any moment."""
    state: dict[str, str] = {}
    held = 0
    for _, model, what, _ in timeline.events:
        if model == "-":
            continue
        before = state.get(model, "unloaded")
        expected = {"loading": "unloaded", "loaded": "loading", "unloaded": "loaded"}[what]
        assert before == expected, f"{model}: {what} after {before}"
        state[model] = what
        held += {"loading": 1, "loaded": 0, "unloaded": -1}[what]
        assert held <= 2, timeline.printed()
