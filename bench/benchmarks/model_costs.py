"""What serving more models costs: ``python -m bench models``.

The resident memory (VmRSS) each extra model adds when loaded at runtime
(``POST /admin/models`` of the same folder under new names, one request each), and the TTFT of
requests naming a LoRA adapter against requests to its base model (tests/models/demo-lora,
fresh prompts, alternating order, the server's own ``metrics.ttft``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness.paths import DEMO, ROOT
from bench.harness.server import live_server

LORA = ROOT / "tests" / "models" / "demo-lora"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _served(models_toml: str, **env: str) -> tuple[Path, dict[str, str]]:
    folder = Path(tempfile.mkdtemp())
    (folder / "models.toml").write_text(models_toml)
    return folder, {"GENAI_MODELS_FILE": str(folder / "models.toml"), **env}


def memory(folder: Path, scheduler: str, extra: int = 2) -> list[float]:
    """RSS in MiB with 1, 2, ... 1 + ``extra`` copies of ``folder`` loaded."""
    entry = f'path = "{folder}"\nscheduler = "{scheduler}"\n'
    _, env = _served(f'[[models]]\nname = "m0"\n{entry}', GENAI_ADMIN="true")
    with live_server(env=env) as server:
        assert server.proc is not None
        client = httpx.Client(base_url=server.url, timeout=300)
        sizes = []
        for i in range(1 + extra):
            if i:
                body = {"name": f"m{i}", "path": str(folder), "scheduler": scheduler}
                client.post("/admin/models", json=body).raise_for_status()
            body = {"model": f"m{i}", "prompt": "warm up", "max_tokens": 4}
            client.post("/v1/completions", json=body).raise_for_status()
            time.sleep(1)
            sizes.append(_rss_mib(server.proc.pid))
        return sizes


def adapter_ttft(rounds: int = 15) -> dict[str, list[float]]:
    """TTFT (ms) per request, for the base model and for its ``pirate`` adapter."""
    _, env = _served(
        f'[[models]]\nname = "base"\npath = "{LORA}"\nscheduler = "generator"\n'
        f'adapters = {{ pirate = "{LORA / "pirate.onnx_adapter"}" }}\n'
    )
    ttft: dict[str, list[float]] = {"base": [], "pirate": []}
    with live_server(env=env) as server:
        client = httpx.Client(base_url=server.url, timeout=300)
        for i in range(rounds):
            for model in ("base", "pirate") if i % 2 else ("pirate", "base"):
                prompt = f"request {i} for {model}: the river and the mountain " * 8
                body = {"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0}
                answer = client.post("/v1/completions", json=body).json()
                ttft[model].append(answer["metrics"]["ttft"] * 1000)
    return ttft


def report(bench_model: Path) -> str:
    lines = ["resident memory with 1, 2, 3 copies of a model loaded (MiB):"]
    for folder, label in ((DEMO, "demo"), (bench_model, bench_model.parent.name)):
        for scheduler in ("generator", "batch"):
            sizes = memory(folder, scheduler)
            step = (sizes[-1] - sizes[0]) / (len(sizes) - 1)
            shown = ", ".join(f"{s:.0f}" for s in sizes)
            lines.append(f"  {label} {scheduler}: {shown} (+{step:.0f} per extra model)")
    lines.append("TTFT, adapter vs base (demo-lora, generator; median [min-max] ms):")
    for model, values in adapter_ttft().items():
        lines.append(
            f"  {model}: {statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"
        )
    return "\n".join(lines)
