"""Transcription speed: the real-time factor of a 30-second clip through the server's
/v1/audio/transcriptions, side by side with a direct og.Generator loop on the same model.

``python -m bench transcribe`` (the committed test model) or ``--shape tiny`` (whisper-tiny's
real dimensions and vocabulary, random weights, built offline once into bench/.cache/ with
modelkit/whisper.py: needs the requirements-build.txt packages). Each request gets a
fresh synthetic clip (its own seed); the two arms alternate, on the same thread settings.
The real-time factor is processing seconds over audio seconds: under 1 is faster than real
time. Random weights never say end-of-text, so every clip decodes the model's whole context
(444 tokens); a real model on real speech writes fewer.
"""

from __future__ import annotations

import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.paths import CACHE, ROOT

TEST_MODEL = ROOT / "tests" / "hub_models" / "whisper-tiny"
DEMO = ROOT / "models" / "demo-llama"


def model_folder(shape: str) -> Path:
    if shape == "test":
        return TEST_MODEL
    folder = CACHE / "models" / "whisper-tiny-v1"
    if not (folder / "genai_config.json").exists():
        print(f"building whisper-tiny's shape into {folder} ...", flush=True)
        subprocess.run(
            [sys.executable, "-m", "modelkit.whisper", "--shape", "tiny", "--out", str(folder)],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
    return folder


def clip(seconds: float, seed: int) -> bytes:
    import soundfile as sf

    from modelkit.whisper import RATE, synth

    out = io.BytesIO()
    sf.write(out, synth(seconds, seed), RATE, format="WAV", subtype="PCM_16")
    return out.getvalue()


def direct(folder: Path, audio: bytes) -> dict[str, float]:
    """The engine alone: our WhisperModel's og.Generator loop, no server."""
    model = _cached_model(folder)
    first: list[float] = []

    def on_text(_: str) -> None:
        if not first:
            first.append(time.perf_counter())

    start = time.perf_counter()
    out = model.transcribe(audio, "en", None, 0.0, on_text, lambda: False)
    total = time.perf_counter() - start
    return {"total": total, "ttft": first[0] - start if first else 0.0, "tokens": len(out.tokens)}


_models: dict[Path, Any] = {}


def _cached_model(folder: Path) -> Any:
    from backends.speech.whisper import WhisperModel

    if folder not in _models:
        _models[folder] = WhisperModel(folder)
    return _models[folder]


def served(url: str, audio: bytes) -> dict[str, float]:
    import httpx

    start = time.perf_counter()
    resp = httpx.post(
        f"{url}/v1/audio/transcriptions",
        files={"file": ("clip.wav", audio, "audio/wav")},
        data={"model": "whisper", "language": "en", "response_format": "verbose_json"},
        timeout=600,
    )
    total = time.perf_counter() - start
    resp.raise_for_status()
    body = resp.json()
    return {
        "total": total,
        "ttft": body["metrics"]["ttft"],
        "server_total": body["metrics"]["total_latency"],
        "tokens": body["usage"]["output_tokens"],
    }


def run(shape: str, seconds: float, reps: int) -> dict[str, Any]:
    from bench.harness.server import live_server

    folder = model_folder(shape)
    _cached_model(folder)  # loaded before timing
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.toml"
        models.write_text(
            f'[[models]]\nname = "demo"\npath = "{DEMO}"\n\n'
            f'[[models]]\nname = "whisper"\npath = "{folder}"\n'
        )
        arms: dict[str, list[dict[str, float]]] = {"direct": [], "server": []}
        with live_server(GENAI_MODELS_FILE=str(models), timeout=300) as server:
            served(server.url, clip(seconds, 10_000))  # warm-up, not counted
            direct(folder, clip(seconds, 10_001))
            for rep in range(reps):
                arms["direct"].append(direct(folder, clip(seconds, 2 * rep)))
                arms["server"].append(served(server.url, clip(seconds, 2 * rep + 1)))

    def summary(rows: list[dict[str, float]]) -> dict[str, float]:
        total = statistics.median(r["total"] for r in rows)
        return {
            "median_seconds": round(total, 4),
            "real_time_factor": round(total / seconds, 5),
            "median_ttft": round(statistics.median(r["ttft"] for r in rows), 4),
            "tokens": statistics.median(r["tokens"] for r in rows),
        }

    out = {
        "model": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder),
        "shape": shape,
        "audio_seconds": seconds,
        "reps": reps,
        "direct": summary(arms["direct"]),
        "server": summary(arms["server"]),
    }
    out["server_over_direct"] = round(
        out["server"]["median_seconds"] / out["direct"]["median_seconds"], 3
    )
    return out


def main(shape: str, seconds: float, reps: int) -> str:
    return json.dumps(run(shape, seconds, reps), indent=2)
