"""TTFT of a chat with an image against the same chat without it, side by side in one run.

The server serves the committed Qwen2.5-VL test model (tests/hub_models/qwen2.5-vl). Each
round sends one image request (a fresh random PNG as a data: URL, so no prefix is reused) and
one text request with the same text (fresh words too), in alternating order. TTFT is the
server's own (``metrics.ttft``: from the request's arrival to its first token), so the image
arm includes decoding and checking the image, og's processor and the vision encoder.

    python -m bench images --reps 10 --size 448
"""

from __future__ import annotations

import base64
import io
import random
import statistics
from typing import Any

from bench.harness.paths import ROOT
from bench.harness.server import live_server

VISION = ROOT / "tests" / "hub_models" / "qwen2.5-vl"
WORDS = "river mountain city light stream answer question model token small large".split()


def png(size: int, rng: random.Random) -> str:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(rng.randrange(2**32)).integers(0, 255, (size, size, 3))
    out = io.BytesIO()
    Image.fromarray(pixels.astype("uint8"), "RGB").save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def one(client: Any, url: str, text: str, image: str | None) -> tuple[float, int]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if image is not None:
        parts.insert(0, {"type": "image_url", "image_url": {"url": image}})
    body = {
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": 8,
        "temperature": 0,
    }
    r = client.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    r.raise_for_status()
    data = r.json()
    return float(data["metrics"]["ttft"]), int(data["usage"]["prompt_tokens"])


def images(reps: int, size: int, seed: int = 0) -> str:
    import httpx

    rng = random.Random(seed)
    arms: dict[str, list[float]] = {"image": [], "text": []}
    tokens: dict[str, int] = {}
    with live_server(GENAI_MODEL_DIR=str(VISION)) as server, httpx.Client() as client:
        one(client, server.url, "warm up", png(size, rng))  # loads the processor
        for i in range(reps):
            text = " ".join(rng.choice(WORDS) for _ in range(24))
            order = ["image", "text"] if i % 2 == 0 else ["text", "image"]
            for arm in order:
                image = png(size, rng) if arm == "image" else None
                ttft, prompt = one(client, server.url, text, image)
                arms[arm].append(ttft)
                tokens[arm] = prompt
    med = {arm: statistics.median(v) for arm, v in arms.items()}
    lines = [
        f"Qwen2.5-VL test model, {reps} rounds, {size}x{size} image, same 24-word text",
        "| arm | prompt tokens | median TTFT (ms) | min | max |",
        "|---|---|---|---|---|",
    ]
    for arm, values in arms.items():
        lines.append(
            f"| {arm} | {tokens[arm]} | {med[arm] * 1000:.1f} | {min(values) * 1000:.1f} | "
            f"{max(values) * 1000:.1f} |"
        )
    lines.append(f"image / text median TTFT: {med['image'] / med['text']:.2f}x")
    return "\n".join(lines)
