"""The web playground in a real headless Chromium against a live server with an API key:
the page asks for the key, lists the model, streams an answer with its TTFT/TPOT, and its stop
button cancels a generation on the server; its pull box pulls a model from a local hub, with
a progress bar, and the pulled model answers.

Needs the system's Chromium (Debian: ``apt-get install -y chromium``) and the ``playwright``
package (requirements-dev.txt); Playwright's own browser download is not used. Skipped, with the
reason, when either is missing; deselect with ``-m "not browser"``.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.harness.server import ServerProcess, live_server
from tests.conftest import metric
from tests.hub_server import LocalHub, demo_repos
from tests.test_pull import hub_env

pytestmark = [pytest.mark.live, pytest.mark.browser]

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (requirements-dev.txt)"
)

KEY = "playground-key"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LAST_ANSWER = "[...document.querySelectorAll('.message.assistant')].pop()"


@pytest.fixture(scope="module")
def chromium() -> str:
    found = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    if found is None:
        pytest.skip(f"no Chromium executable ({', '.join(CHROMIUM_NAMES)}) on PATH")
    return found


@pytest.fixture(scope="module")
def server(chromium: str) -> Iterator[ServerProcess]:  # no browser, no server to start
    with live_server(env={"GENAI_API_KEY": KEY}) as running:
        yield running


@pytest.fixture
def page(chromium: str) -> Iterator[Any]:  # each test names its server
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            page.set_default_timeout(30_000)
            yield page
        finally:
            browser.close()


def cancelled_total(server: ServerProcess) -> float:
    resp = httpx.get(
        server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10
    )
    resp.raise_for_status()
    return metric(resp.text, "genai_requests_cancelled_total")


def send(page: Any, text: str) -> Any:
    page.fill("#prompt", text)
    page.click("#send")
    return page.locator(".message.assistant").last


def test_playground_streams_measures_and_stops(
    server: ServerProcess, page: Any, tmp_path: Path
) -> None:
    expect = sync_api.expect
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    page.goto(server.url + "/")

    # No key yet: the model list is refused, and the page says what to do.
    expect(page.locator("#status")).to_contain_text("fill in the API key")
    page.fill("#api-key", KEY)
    page.press("#api-key", "Tab")  # "change": kept, and the models are listed again
    expect(page.locator("#model option")).to_have_text(["onnx-genai"])
    expect(page.locator("#status")).to_have_text("")
    assert page.evaluate("localStorage.getItem('genai-playground.api-key')") == KEY

    # A short answer: its text, then the metrics of its last chunk (TTFT, TPOT, tokens/s).
    page.fill("#temperature", "0")
    page.fill("#max-tokens", "48")
    answer = send(page, "Hello!")
    expect(answer).to_have_attribute("data-outcome", "done")
    assert answer.locator(".content").inner_text().strip()
    stats = answer.locator(".stats")
    expect(stats).to_have_text(re.compile(r"TTFT [\d.]+ ms · TPOT [\d.]+ ms · [\d.]+ tokens/s"))
    ttft, tpot = float(stats.get_attribute("data-ttft")), float(stats.get_attribute("data-tpot"))
    assert 0 < ttft < 30 and 0 <= tpot < 5, (ttft, tpot)
    assert answer.get_attribute("data-request-id")
    shots = [tmp_path / "playground-answer.png", tmp_path / "playground-stopped.png"]
    page.screenshot(path=str(shots[0]))

    # A long answer (EOS suppressed), stopped as soon as its text shows: the stream closes and
    # the server cancels the generation. The demo model writes 1,500 tokens in about a second,
    # so on a busy machine the answer can end before the click lands: then it is sent again.
    page.fill("#max-tokens", "1500")  # with the history, within the demo model's 2,048
    page.fill("#min-tokens", "1500")
    outcomes: list[str | None] = []
    cancelled = False
    while not cancelled and len(outcomes) < 3:
        if outcomes:
            page.click("#clear")  # a new chat, so the history stays short
        before = cancelled_total(server)
        answer = send(page, "Tell me a long story.")
        page.wait_for_function(
            f"() => {{ const a = {LAST_ANSWER}; return a.dataset.outcome || "
            "(a.classList.contains('streaming') && a.querySelector('.content').textContent); }"
        )
        page.click("#stop", force=True)  # no waiting for actionability: every ms counts
        expect(answer).to_have_attribute("data-outcome", re.compile("."))
        outcomes.append(answer.get_attribute("data-outcome"))
        if outcomes[-1] == "stopped":
            expect(answer.locator(".stats")).to_contain_text("stopped after")
            deadline = time.monotonic() + 10
            while not cancelled and time.monotonic() < deadline:
                cancelled = cancelled_total(server) > before
                time.sleep(0.1)
    status = page.locator("#status").inner_text()
    assert cancelled, f"no long answer was stopped before it ended: {outcomes}, {status}"

    page.screenshot(path=str(shots[1]))
    print(f"playground screenshots: {', '.join(map(str, shots))} (long answers: {outcomes})")
    assert not page_errors, page_errors


VISION = Path(__file__).resolve().parents[1] / "hub_models" / "qwen2.5-vl"


@pytest.fixture(scope="module")
def vision_server(chromium: str) -> Iterator[ServerProcess]:
    with live_server(env={"GENAI_MODEL_DIR": str(VISION)}) as running:
        yield running


def test_playground_attaches_an_image_and_shows_it(
    vision_server: ServerProcess, chromium: str
) -> None:
    """A file picked in the page goes as an image_url part; the conversation shows it, and
    the answer is the oracle's (the vision test model's recorded greedy tokens)."""
    import json

    import onnxruntime_genai as og

    case = json.loads((VISION / "expected.json").read_text())["cases"][0]
    stream = og.Tokenizer(str(VISION)).create_stream()
    want = "".join(stream.decode(t) for t in case["generated_ids"])
    expect = sync_api.expect
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(vision_server.url + "/")
            expect(page.locator("#model option")).to_have_count(1)
            page.fill("#temperature", "0")
            page.fill("#max-tokens", str(len(case["generated_ids"])))
            page.set_input_files("#image", str(VISION / "images" / "square.png"))
            expect(page.locator("#image-preview")).to_be_visible()
            answer = send(page, "What is in the picture?")
            expect(answer).to_have_attribute("data-outcome", "done")
            expect(page.locator(".message.user img")).to_have_count(1)
            expect(page.locator("#image-preview")).to_be_hidden()
            assert answer.locator(".content").text_content() == want
            assert not errors
        finally:
            browser.close()


def test_playground_shows_what_speculation_accepted(server: ServerProcess, page: Any) -> None:
    """With speculative tokens set, an answer that copies its prompt says how many drafted
    tokens the model took (the usage's completion_tokens_details), beside its timing."""
    expect = sync_api.expect
    page.goto(server.url + "/")
    page.fill("#api-key", KEY)
    page.press("#api-key", "Tab")
    expect(page.locator("#model option")).to_have_text(["onnx-genai"])
    page.fill("#temperature", "0")
    page.fill("#max-tokens", "60")
    page.fill("#speculative", "8")
    answer = send(page, "Repeat exactly: /data/notes-1/notes/test_moon_search_door7/notes/app.txt")
    expect(answer).to_have_attribute("data-outcome", "done")
    stats = answer.locator(".stats")
    expect(stats).to_have_text(re.compile(r"tokens · \d+% of \d+ drafted accepted"))
    drafted, accepted = (int(stats.get_attribute(f"data-{k}")) for k in ("drafted", "accepted"))
    assert 0 < accepted <= drafted, (drafted, accepted)
    page.fill("#speculative", "0")  # the request turns it off: nothing drafted, nothing shown
    answer = send(page, "Repeat exactly: /lib/repo/tmp-for-ci/test_wind_test_model6/todo.toml")
    expect(answer).to_have_attribute("data-outcome", "done")
    expect(answer.locator(".stats")).not_to_contain_text("drafted")


ADMIN = "playground-admin-key"
PULLED = "test-org/demo-llama"


@pytest.fixture(scope="module")
def hub_server(
    chromium: str, demo_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server with a user key and an admin key, pulling from a local hub into a fresh cache."""
    with LocalHub(demo_repos(demo_model_dir)) as hub:
        cache = tmp_path_factory.mktemp("hf-cache")
        env = hub_env(hub, cache, GENAI_API_KEY=KEY, GENAI_ADMIN_API_KEY=ADMIN)
        with live_server(env=env) as running:
            yield running


def use_key(page: Any, key: str) -> None:
    page.fill("#api-key", key)
    page.press("#api-key", "Tab")  # "change": the models are listed again with this key


def test_playground_pulls_a_model_and_chats_with_it(
    hub_server: ServerProcess, page: Any, tmp_path: Path
) -> None:
    """The pull box streams POST /api/pull: a user key is refused (an admin action), a repo
    the hub lacks shows the stream's error line, and a real pull fills the progress bar, puts
    the model in the picker, chosen, and it answers the next message."""
    expect = sync_api.expect
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    page.goto(hub_server.url + "/")
    pull, status = page.locator("#pull"), page.locator("#pull-status")

    use_key(page, KEY)
    expect(page.locator("#model option")).to_have_text(["onnx-genai"])
    page.fill("#pull-name", PULLED)
    page.click("#pull-button")
    expect(pull).to_have_attribute("data-outcome", "failed")
    expect(status).to_contain_text("403")
    expect(status).to_contain_text("admin key")

    use_key(page, ADMIN)
    page.fill("#pull-name", "test-org/absent")
    page.click("#pull-button")
    expect(pull).to_have_attribute("data-outcome", "failed")
    expect(status).to_contain_text("Pull failed")
    expect(status).to_contain_text("test-org/absent")  # the stream's last line, {"error": ...}

    page.fill("#pull-name", PULLED)
    page.click("#pull-button")
    expect(pull).to_have_attribute("data-outcome", "done", timeout=90_000)
    expect(status).to_have_text(
        re.compile(rf"Pulled {PULLED} \([\d.]+ MB\): it loads on its first message\.")
    )
    value, top = page.eval_on_selector("#pull-progress", "p => [p.value, p.max]")
    assert top > 100_000 and value == top, (value, top)  # the demo model's bytes, all of them
    expect(page.locator("#model option")).to_have_text(["onnx-genai", PULLED])
    expect(page.locator("#model")).to_have_value(PULLED)

    page.fill("#temperature", "0")
    page.fill("#max-tokens", "32")
    answer = send(page, "Hello!")
    expect(answer).to_have_attribute("data-outcome", "done")
    assert answer.locator(".content").inner_text().strip()
    ps = httpx.get(
        hub_server.url + "/api/ps", headers={"Authorization": f"Bearer {KEY}"}, timeout=10
    )
    assert PULLED in [m["name"] for m in ps.json()["models"]]  # it answered, so it loaded

    page.locator("#pull").scroll_into_view_if_needed()  # the box, its full bar and the answer
    shot = tmp_path / "playground-pull.png"
    page.screenshot(path=str(shot))
    print(f"playground pull screenshot: {shot}")
    assert not page_errors, page_errors
