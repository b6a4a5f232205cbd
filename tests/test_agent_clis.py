"""Codex CLI and Claude Code, unchanged, against a live server on the demo model.

The clients are the npm packages pinned in tests/agent_clis.json (bump them deliberately),
installed on first use under .cache/agent-clis/ with ``npm install --prefix`` (never
globally). Without npm these tests skip, saying so. Each client runs with its default settings:
only the base URL, a key and the model name are given, in a fresh home folder.

They need a demo model that ends its turns, writes hermes ``<tool_call>``s and holds an agent's
prompt (with the demo model's template Codex sends 9,493 tokens, Claude Code 6,379 for
"Say hello."); with a context under 32,768 tokens they skip, saying why.
``AGENT_CLI_MODEL_DIR`` runs them against another model folder (a candidate demo model): the
server's own GENAI_* settings are not passed on.

Each runs three times, as on three kinds of CPU (tests/kernel_variants.py): on this machine's
int4 kernels, on its other int4 kernel path, and with every logit moved at random by up to the
documented difference between CPU kinds' kernels (``GENAI_LOGIT_NOISE=1.2``). A verdict that
rests on a near-tie fails one of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.harness.server import ServerProcess, live_server
from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.kernel_variants import NOISE, other_kernels

pytestmark = [pytest.mark.live, pytest.mark.agents]

PINS: dict[str, str] = json.loads((REPO_ROOT / "tests" / "agent_clis.json").read_text())
CACHE = REPO_ROOT / ".cache" / "agent-clis"
MODEL = "onnx-genai"
# The least context that holds Codex's default prompt (tools and instructions) with room to
# answer; the demo model's must be at least this.
NEEDED_CONTEXT = 32768
# Seconds per CLI run: a run takes seconds on the demo model (its sliding window reads an agent's
# prompt in about one); the cap stops a run whose model never ends its turns.
RUN_TIMEOUT = 300


def install(package: str) -> Path:
    """The pinned package's folder of executables, installed once under the cache folder."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the agent CLIs come from the npm registry")
    version = PINS[package]
    prefix = CACHE / f"{package.replace('/', '+')}@{version}"
    bin_dir = prefix / "node_modules" / ".bin"
    if not (prefix / ".installed").exists():
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                "--no-save",
                f"{package}@{version}",
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        (prefix / ".installed").write_text(version)
    return bin_dir


MODEL_DIR = Path(os.environ.get("AGENT_CLI_MODEL_DIR") or DEMO_MODEL_DIR)


def demo_context() -> int:
    config = json.loads((MODEL_DIR / "genai_config.json").read_text())
    return int(config["model"]["context_length"])


# The machine-kind matrix (tests/kernel_variants.py): this machine's own int4 kernels, its
# other int4 kernel path, and its logits moved by the documented difference between CPU kinds.
KERNELS = ["own", "other-kernels", "noise"]


@pytest.fixture(scope="module", params=KERNELS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    context = demo_context()
    if context < NEEDED_CONTEXT:
        pytest.skip(
            f"the demo model's context ({context} tokens) cannot hold an agent's prompt "
            f"(needs {NEEDED_CONTEXT}): these tests need the trained demo model"
        )
    env = {"GENAI_MODEL_DIR": str(MODEL_DIR)}
    if request.param == "other-kernels":
        folder = other_kernels(MODEL_DIR, tmp_path_factory.mktemp("other-kernels") / "model")
        env["GENAI_MODEL_DIR"] = str(folder)
    elif request.param == "noise":
        env["GENAI_LOGIT_NOISE"] = str(NOISE)
    with live_server(env=env, log_level="info", timeout=120) as live:
        yield live


def run(
    args: list[str], cwd: Path, env: dict[str, str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """A CLI run in ``cwd`` with only ``env`` beyond PATH, and a fresh HOME under the test's
    own ``tmp_path`` (no user settings, nothing shared with another run)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb"}
    return subprocess.run(
        args,
        cwd=cwd,
        env={**base, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )


def finished_requests(server: ServerProcess) -> list[dict[str, Any]]:
    """The server's one log line per request, parsed."""
    lines = [line for line in server.output().splitlines() if '"request_finished"' in line]
    return [json.loads(line[line.index("{") :]) for line in lines]


# ---- Codex -----------------------------------------------------------------------------------
def codex(server: ServerProcess, tmp_path: Path, prompt: str) -> tuple[Any, Path]:
    """``codex exec --json`` with a provider for the server: (the run, its CODEX_HOME)."""
    bin_dir = install("@openai/codex")
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "onnx-genai"\n\n'
        "[model_providers.onnx-genai]\n"
        'name = "onnx-genai"\n'
        f'base_url = "{server.url}/v1"\n'
        'wire_api = "responses"\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    args = [str(bin_dir / "codex"), "exec", "--json", "--skip-git-repo-check", prompt]
    return run(args, work, {"CODEX_HOME": str(codex_home)}, tmp_path), codex_home


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_codex_exec_answers(server: ServerProcess, tmp_path: Path) -> None:
    done, _ = codex(server, tmp_path, "Say hello.")
    assert done.returncode == 0, done.stdout + done.stderr
    messages = [
        e["item"]["text"]
        for e in events(done.stdout)
        if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages and messages[-1].strip(), done.stdout
    assert any(e["type"] == "turn.completed" for e in events(done.stdout))
    assert finished_requests(server)[-1]["finish_reason"] == "stop"  # it ended its turn


def test_codex_runs_a_call_and_answers_it_with_its_output(
    server: ServerProcess, tmp_path: Path
) -> None:
    done, codex_home = codex(server, tmp_path, "Run the command echo hello.")
    assert done.returncode == 0, done.stdout + done.stderr
    # What Codex sent the model, as its session file records it.
    lines = [
        json.loads(line)
        for rollout in codex_home.glob("sessions/**/*.jsonl")
        for line in rollout.read_text().splitlines()
    ]
    items = [e["payload"] for e in lines if e.get("type") == "response_item"]
    calls = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert calls and set(outputs) & set(calls), done.stdout
    ran = [e for e in events(done.stdout) if e["type"] == "item.completed"]
    assert ran and ran[-1]["item"]["type"] == "agent_message", done.stdout


@pytest.fixture
def short_temp_folder() -> Iterator[Path]:
    """A temporary folder as ``mkdtemp`` names it (``/tmp/tmpk3j9x2ab``): the demo model copies
    a path of that length into its call, not pytest's 70-character ``tmp_path`` ones."""
    folder = Path(tempfile.mkdtemp())
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---- Claude Code -----------------------------------------------------------------------------
def claude(server: ServerProcess, tmp_path: Path, *args: str, work: Path | None = None) -> Any:
    """``claude -p`` in ``work`` (default: a folder under ``tmp_path``)."""
    bin_dir = install("@anthropic-ai/claude-code")
    work = work or tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "unused"}
    return run([str(bin_dir / "claude"), "-p", *args, "--model", MODEL], work, env, tmp_path)


def test_claude_code_answers_with_its_default_settings(
    server: ServerProcess, tmp_path: Path
) -> None:
    done = claude(server, tmp_path, "Say hello.")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip()


def test_claude_code_reads_a_file_with_the_read_tool(
    server: ServerProcess, tmp_path: Path, short_temp_folder: Path
) -> None:
    note = short_temp_folder / "notes.txt"
    note.write_text("The secret word is avocado.\n")
    done = claude(
        server,
        tmp_path,
        f"Read the file {note} and tell me what it says.",
        "--tools",
        "Read",
        "--output-format",
        "stream-json",
        "--verbose",
        work=short_temp_folder,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    messages = [e for e in events(done.stdout) if e["type"] in ("assistant", "user")]
    uses = [
        block
        for e in messages
        if e["type"] == "assistant"
        for block in e["message"]["content"]
        if block["type"] == "tool_use"
    ]
    results = [
        block
        for e in messages
        if e["type"] == "user" and isinstance(e["message"]["content"], list)
        for block in e["message"]["content"]
        if block["type"] == "tool_result"
    ]
    # The round trip, whatever file the model named: a Read call, Claude Code's result for that
    # call sent back, and an answer after it.
    assert [u["name"] for u in uses][:1] == ["Read"], done.stdout
    assert results and results[0]["tool_use_id"] == uses[0]["id"]
    [result] = [e for e in events(done.stdout) if e["type"] == "result"]
    assert result["subtype"] == "success" and result["num_turns"] >= 2, done.stdout
    assert result["result"].strip(), done.stdout
    # The file itself: the demo model must copy the folder's made-up name into its call, which
    # it gets wrong now and then (docs/models.md), so a miss is reported, not failed.
    if "avocado" not in json.dumps(results[0]["content"]):
        pytest.xfail(f"the demo model did not copy {note} into its call: {uses[0]['input']}")
