"""Contract: the official ``ollama`` client sends an image (a file path, raw bytes) to a live
server on the Qwen2.5-VL test model and gets the Hugging Face oracle's greedy answer."""

from __future__ import annotations

import ollama
import pytest

from bench.harness.server import live_server
from tests.routes.ollama.test_images import ASK, ONE, VISION, N, oracle_text

pytestmark = pytest.mark.live


def test_ollama_sdk_sends_an_image_file_and_gets_the_openai_doors_answer() -> None:
    [image] = ONE["images"]
    with live_server(
        GENAI_MODEL_DIR=str(VISION), GENAI_MODEL_NAME="qwen-vl", GENAI_INTRA_OP_THREADS="1"
    ) as server:
        api = ollama.Client(host=server.url, timeout=60)
        greedy = {"temperature": 0, "num_predict": N, "min_tokens": N}
        path = VISION / "images" / image
        said = api.chat(
            model="qwen-vl",
            messages=[{"role": "user", "content": ASK, "images": [path]}],  # the SDK encodes it
            options=greedy,
        )
        assert said.message.content == oracle_text(ONE["generated_ids"])
        made = api.generate(model="qwen-vl", prompt=ASK, images=[path.read_bytes()], options=greedy)
        assert made.response == said.message.content
