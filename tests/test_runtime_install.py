"""The runtime installs alone and serves every route: the image's install and command, run on
this machine (issue 32).

`bash scripts/serve.sh` and both Dockerfiles install requirements.txt and nothing else, while
this suite runs in the dev environment, whose packages can hide a runtime dependency that
requirements.txt forgot (python-multipart did: the server exited at start-up). So this test
makes a new virtual environment from what the Dockerfile installs, copies the build context as
the image holds it, starts the Dockerfile's CMD with its environment (paths mapped back to this
checkout, loopback and a free port), waits for its HEALTHCHECK, calls every operation in the
server's own /openapi.json (scripts/container_probe.py, as scripts/container-check.sh does in
the image) and drains it with SIGTERM. Where containers run, .ci/run also builds and runs the
image itself; where they cannot, this is what stands in for it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.harness.server import free_port
from tests.image_recipe import ROOT, build_context, read_recipe
from tests.test_pins import pin, requirements

pytestmark = pytest.mark.live

PROBE = ROOT / "scripts" / "container_probe.py"


@dataclass
class Runtime:
    python: Path  # the new environment's interpreter
    app: Path  # the image's /app: the build context minus what the source stage drops
    env: dict[str, str]  # the image's environment, mapped to this machine


def pip_install(python: Path, files: list[Path], *options: str) -> None:
    args = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    for file in files:
        args += ["-r", str(file)]
    done = subprocess.run([*args, *options], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"pip install failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    recipe = read_recipe("Dockerfile")
    scratch = tmp_path_factory.mktemp("image")
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip_install(venv / "bin" / "python", recipe.prepare_install(scratch))
    app = scratch / "app"
    for file in build_context():
        if file.split("/")[0] not in recipe.app_drops:
            (app / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / file, app / file)
    env = recipe.local_env(scratch)
    env.update(
        VIRTUAL_ENV=str(venv),
        PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        HOME=str(scratch),
        HOST="127.0.0.1",
        PORT=str(free_port()),
        # As scripts/container-check.sh runs the image: admin routes on so they are probed too,
        # one intra-op thread so the drain's streams are still running when SIGTERM comes.
        GENAI_ADMIN="true",
        GENAI_INTRA_OP_THREADS="1",
    )
    return Runtime(venv / "bin" / "python", app, env)


def test_the_runtime_alone_serves_every_route_and_drains(runtime: Runtime) -> None:
    recipe = read_recipe("Dockerfile")
    base = f"http://127.0.0.1:{runtime.env['PORT']}"
    log = runtime.app.parent / "server.log"
    with log.open("wb") as out:
        # The CMD as the image runs it: `python` found on the PATH the Dockerfile sets.
        server = subprocess.Popen(
            recipe.command, cwd=runtime.app, env=runtime.env, stdout=out, stderr=out
        )
    try:
        healthy = False
        for _ in range(240):
            if server.poll() is not None:
                break
            check = subprocess.run(
                recipe.healthcheck, cwd=runtime.app, env=runtime.env, capture_output=True
            )
            if check.returncode == 0:
                healthy = True
                break
            time.sleep(0.5)
        assert healthy, f"the HEALTHCHECK never passed (exit {server.poll()}):\n{log.read_text()}"

        routes = probe("routes", base, "--page")
        assert routes.returncode == 0, routes.stdout + routes.stderr
        assert "route checks passed" in routes.stdout

        drain = probe("drain", base, "--", "kill", "-TERM", str(server.pid))
        assert drain.returncode == 0, drain.stdout + drain.stderr
        assert server.wait(60) == 0, log.read_text()
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGKILL)
            server.wait()
    assert "Traceback" not in log.read_text(), log.read_text()


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENAI_")}
    return subprocess.run(
        [sys.executable, str(PROBE), *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_the_cuda_image_installs_the_gpu_builds_and_not_the_cpu_ones(
    runtime: Runtime, tmp_path: Path
) -> None:
    """Dockerfile.cuda's swapped requirements, resolved by pip (a dry run: no GPU here): the
    CUDA builds at requirements.txt's pins, and neither CPU build, whose onnxruntime would
    shadow the GPU one. Resolved for this machine's Python, not the image's."""
    files = read_recipe("Dockerfile.cuda").prepare_install(tmp_path)
    report = tmp_path / "report.json"
    pip_install(runtime.python, files, "--dry-run", "--ignore-installed", "--report", str(report))
    chosen = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    pins = requirements("requirements.txt")
    assert chosen["onnxruntime-genai-cuda"] == pin(pins["onnxruntime-genai"])
    assert chosen["onnxruntime-gpu"] == pin(pins["onnxruntime"])
    assert "onnxruntime" not in chosen and "onnxruntime-genai" not in chosen, sorted(chosen)
