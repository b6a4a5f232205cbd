"""Resident memory before and after the worst requests each kind of door allows (issue 37).

One server serves the six model kinds from a models file (the demo chat model, the Qwen2.5-VL,
Whisper, sentence-transformers, decoder-embedder and reranker test models). After ordinary
requests of each kind (the steady state: 16 texts of 200 characters embedded and reranked, two
1024 x 1024 images, a 30 s clip), ``--count`` worst-case requests of each kind are sent one
after another, within the default limits:

- embeddings: one 15 MiB text with ``truncate: true`` (/v1/embeddings), and 500 texts of 30 KB
  (/api/embed, which truncates by default);
- rerank: a query against 500 documents of 30 KB, ``truncate: true``;
- images: 8 images of 25 Mpx (the pixel cap) in one chat on the vision model;
- audio: 600 s (the duration cap) of 48 kHz FLAC on Whisper.

For each kind it prints the statuses, the time, the peak RSS while it ran (VmHWM, reset before
each kind) and the RSS two seconds after its last request, against the steady state.

    python -m bench.probes.hostile_rss [--count 20] [--kinds embeddings,rerank,images,audio]
    python -m bench.probes.hostile_rss --checkout <another checkout>  # the same, another commit
"""

from __future__ import annotations

import argparse
import base64
import io
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.harness.paths import DEMO, ROOT
from bench.harness.server import ServerProcess

HUB = ROOT / "tests" / "hub_models"
MIB = 1024 * 1024
Send = Callable[[httpx.Client], httpx.Response]


def six_models(demo: Path = DEMO, hub: Path = HUB) -> str:
    """A models file serving one model of each kind (chat first: the default)."""
    entries = [
        ("demo", demo),
        ("vision", hub / "qwen2.5-vl"),
        ("whisper", hub / "whisper-tiny"),
        ("embedder", hub / "st-embedder"),
        ("decoder-embedder", hub / "decoder-embedder"),
        ("reranker", hub / "reranker"),
    ]
    return "\n".join(f'[[models]]\nname = "{name}"\npath = "{path}"\n' for name, path in entries)


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def reset_peak(pid: int) -> None:
    """VmHWM back to the current RSS (Linux: clear_refs 5), so the next peak is one kind's."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


# ---- the requests --------------------------------------------------------------------------
def text_of(chars: int) -> str:
    words = "river mountain city light stream answer question model token small large "
    return (words * (chars // len(words) + 1))[:chars]


def png_data_url(side: int) -> str:
    """A ``side`` x ``side`` PNG (stripes: it compresses, as a 25 Mpx image must to fit)."""
    import numpy as np
    from PIL import Image

    row = (np.arange(side) * 7 % 256).astype("uint8")
    pixels = np.broadcast_to(row[None, :, None], (side, side, 3))
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels), "RGB").save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def flac(seconds: float, rate: int = 48_000) -> bytes:
    """A quiet tone: compresses to a few MiB however long."""
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    pcm = (0.02 * np.sin(2 * np.pi * 220 * t)).astype("float32")
    out = io.BytesIO()
    sf.write(out, pcm, rate, format="FLAC", subtype="PCM_16")
    return out.getvalue()


def chat(model: str, parts: list[dict[str, Any]] | str) -> dict[str, Any]:
    content = parts if isinstance(parts, list) else parts
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 1}


def ordinary() -> dict[str, list[Send]]:
    """Ordinary requests of each kind: what the steady state has served (a batch of texts,
    two camera-sized images, a 30-second clip)."""
    texts = [text_of(200)] * 16  # within the test models' 64 tokens
    images = [{"type": "image_url", "image_url": {"url": png_data_url(1024)}} for _ in range(2)]
    audio = flac(30.0)
    return {
        "embeddings": [
            lambda c: c.post("/v1/embeddings", json={"model": "embedder", "input": texts}),
            lambda c: c.post("/api/embed", json={"model": "embedder", "input": texts[:4]}),
        ],
        "rerank": [lambda c: c.post("/v1/rerank", json={"query": "q", "documents": texts})],
        "images": [lambda c: c.post("/v1/chat/completions", json=chat("vision", images))],
        "audio": [lambda c: transcribe(c, audio)],
        "chat": [lambda c: c.post("/v1/chat/completions", json=chat("demo", "hello"))],
    }


def transcribe(client: httpx.Client, data: bytes) -> httpx.Response:
    files = {"file": ("a.flac", data, "audio/flac")}
    return client.post(
        "/v1/audio/transcriptions", files=files, data={"model": "whisper", "language": "en"}
    )


def worst() -> dict[str, list[Send]]:
    """The worst request of each kind within the default limits (16 MiB bodies, 512 inputs,
    25 Mpx and 8 images, 600 s and 25 MiB of audio)."""
    huge = text_of(15 * MIB)
    many = [text_of(30_000)] * 500
    images = [{"type": "image_url", "image_url": {"url": png_data_url(5000)}} for _ in range(8)]
    long_audio = flac(600.0)
    return {
        "embeddings": [
            lambda c: c.post(
                "/v1/embeddings", json={"model": "embedder", "input": huge, "truncate": True}
            ),
            lambda c: c.post("/api/embed", json={"model": "embedder", "input": many}),
        ],
        "rerank": [
            lambda c: c.post(
                "/v1/rerank", json={"query": "which", "documents": many, "truncate": True}
            ),
        ],
        "images": [lambda c: c.post("/v1/chat/completions", json=chat("vision", images))],
        "audio": [lambda c: transcribe(c, long_audio)],
    }


# ---- the run -------------------------------------------------------------------------------
def started(checkout: Path, folder: Path) -> ServerProcess:
    (folder / "models.toml").write_text(six_models())
    env = {"GENAI_MODELS_FILE": str(folder / "models.toml")}
    server = ServerProcess("rss", env, cwd=checkout)
    server.start()
    if not server.wait_ready(300):
        raise RuntimeError(f"the server did not start: {server.error}")
    return server


def rows(server: ServerProcess, kinds: list[str], count: int) -> Iterator[dict[str, Any]]:
    assert server.proc is not None
    pid = server.proc.pid
    client = httpx.Client(base_url=server.url, timeout=1800)
    for sends in ordinary().values():
        for send in sends:
            send(client).raise_for_status()
    time.sleep(2)
    steady = rss_mib(pid)
    yield {"kind": "steady state", "rss": steady}
    cases = worst()
    for kind in kinds:
        reset_peak(pid)
        statuses: dict[int, int] = {}
        trace: list[float] = []  # RSS after each request
        began = time.perf_counter()
        for i in range(count):
            send = cases[kind][i % len(cases[kind])]
            status = send(client).status_code
            statuses[status] = statuses.get(status, 0) + 1
            trace.append(rss_mib(pid))
        took = time.perf_counter() - began
        peak = rss_mib(pid, "VmHWM")
        time.sleep(2)
        after = rss_mib(pid)
        yield {
            "kind": kind,
            "statuses": statuses,
            "seconds": took,
            "peak": peak,
            "rss": after,
            "vs_steady": after / steady - 1,
            "trace": trace,
        }
    healthy = client.get("/healthz").status_code
    yield {"kind": "end", "rss": rss_mib(pid), "healthz": healthy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20, help="worst-case requests per kind")
    parser.add_argument("--kinds", default="embeddings,rerank,images,audio")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to serve")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = started(args.checkout, Path(folder))
        try:
            for row in rows(server, args.kinds.split(","), args.count):
                if "statuses" not in row:
                    print(f"{row['kind']}: RSS {row['rss']:.0f} MiB", row.get("healthz", ""))
                    continue
                print(
                    f"{row['kind']}: {args.count} requests {row['statuses']} in "
                    f"{row['seconds']:.1f} s; peak {row['peak']:.0f} MiB, after "
                    f"{row['rss']:.0f} MiB ({row['vs_steady']:+.1%} of the steady state); after "
                    f"each request: {' '.join(f'{r:.0f}' for r in row['trace'])}",
                    flush=True,
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
