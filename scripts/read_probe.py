"""How often does a demo model copy a made-up temporary folder into Claude Code's Read call?

``record`` runs Claude Code (the version tests/agent_clis.json pins, installed with npm under
.cache/agent-clis/ as tests/test_agent_clis.py installs it) once against the server on a model
folder, with ``--tools Read`` and "Read the file <a mkdtemp folder>/notes.txt and tell me what
it says.", and keeps the /v1/messages request it sent under .cache/read-probe/ (Claude Code's
own prompt: kept on this machine, never committed).

``score MODEL_DIR`` sends that request again, greedy and not streamed, to the server on
``MODEL_DIR`` (in process) with ``--paths`` made-up folder names of mkdtemp's form in place of
the recorded one (everywhere it appears: the request and the working folder), and counts the
answers that call Read, and those whose ``file_path`` is exactly the made-up file.

    python scripts/read_probe.py record
    python scripts/read_probe.py score models/demo-llama --paths 40
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RECORDED = ROOT / ".cache" / "read-probe" / "request.json"
CLI = "@anthropic-ai/claude-code"
MKDTEMP_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"  # tempfile's own alphabet


def install_claude() -> Path:
    """Claude Code's executable, installed once where tests/test_agent_clis.py installs it."""
    version = json.loads((ROOT / "tests" / "agent_clis.json").read_text())[CLI]
    prefix = ROOT / ".cache" / "agent-clis" / f"{CLI.replace('/', '+')}@{version}"
    if not (prefix / ".installed").exists():
        npm = shutil.which("npm") or sys.exit("npm is not installed: Claude Code comes from npm")
        subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
             f"{CLI}@{version}"],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        (prefix / ".installed").write_text(version)
    return prefix / "node_modules" / ".bin" / "claude"


class Recorder:
    """An ASGI wrapper that keeps the body of every POST /v1/messages, then passes it on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/messages":
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        self.bodies.append(json.loads(body))
        given = False

        async def replay() -> Any:
            nonlocal given
            if given:
                return await receive()
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` on a free local port in a thread: its base URL, once /healthz answers 200."""
    import httpx
    import uvicorn

    from bench.harness.server import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            sys.exit("the server did not become healthy in 120 s")
        time.sleep(0.2)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


def make_app(model_dir: Path) -> Any:
    from app_onnx_genai import create_app
    from config.settings import Settings

    return create_app(Settings.load(model_dir=model_dir))


def record(model_dir: Path) -> None:
    claude = install_claude()
    recorder = Recorder(make_app(model_dir))
    folder = Path(tempfile.mkdtemp())
    note = folder / "notes.txt"
    note.write_text("The secret word is avocado.\n")
    with tempfile.TemporaryDirectory() as home, serving(recorder) as url:
        env = {"PATH": os.environ["PATH"], "HOME": home, "TERM": "dumb"}
        env |= {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "unused"}
        prompt = f"Read the file {note} and tell me what it says."
        subprocess.run(
            [str(claude), "-p", prompt, "--tools", "Read", "--model", "onnx-genai"],
            cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
    shutil.rmtree(folder, ignore_errors=True)
    asks = [b for b in recorder.bodies if prompt in json.dumps(b) and b.get("tools")]
    if not asks:
        sys.exit(f"Claude Code sent no request with tools and the prompt: {len(recorder.bodies)}")
    RECORDED.parent.mkdir(parents=True, exist_ok=True)
    RECORDED.write_text(json.dumps({"folder": str(folder), "request": asks[0]}))
    print(f"recorded Claude Code's request ({len(json.dumps(asks[0])):,} characters)")


def made_up_folder(rng: random.Random) -> str:
    return "/tmp/tmp" + "".join(rng.choice(MKDTEMP_LETTERS) for _ in range(8))


def score(model_dir: Path, paths: int, seed: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    recorded = json.loads(RECORDED.read_text())
    text, old = json.dumps(recorded["request"]), recorded["folder"]
    rng = random.Random(seed)
    calls = exact = 0
    misses: list[str] = []
    with TestClient(make_app(model_dir)) as client:
        while client.get("/healthz").status_code != 200:
            time.sleep(0.2)
        for _ in range(paths):
            folder = made_up_folder(rng)
            body = json.loads(text.replace(old, folder)) | {
                "stream": False,
                "temperature": 0,
                "max_tokens": 256,
            }
            resp = client.post("/v1/messages", json=body)
            resp.raise_for_status()
            uses = [b for b in resp.json()["content"] if b["type"] == "tool_use"]
            reads = [u for u in uses if u["name"] == "Read"]
            calls += bool(reads)
            got = reads[0]["input"].get("file_path") if reads else None
            exact += got == f"{folder}/notes.txt"
            if got != f"{folder}/notes.txt":
                misses.append(f"{folder}/notes.txt -> {got}")
    return {"paths": paths, "read_calls": calls, "exact": exact, "misses": misses[:10]}


def main() -> None:
    from config.settings import DEMO_MODEL_DIR

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record Claude Code's Read request")
    rec.add_argument("model_dir", type=Path, nargs="?", default=DEMO_MODEL_DIR)
    sc = sub.add_parser("score", help="score a model folder on the recorded request")
    sc.add_argument("model_dir", type=Path)
    sc.add_argument("--paths", type=int, default=40, help="made-up folders to try")
    sc.add_argument("--seed", type=int, default=0, help="the made-up folders' seed")
    args = ap.parse_args()
    if args.command == "record":
        record(args.model_dir)
    else:
        print(json.dumps(score(args.model_dir, args.paths, args.seed), indent=1))


if __name__ == "__main__":
    main()
