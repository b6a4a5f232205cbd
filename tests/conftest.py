"""Shared fixtures. API tests run the real app on the real embedded demo model."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app_onnx_genai import create_app  # noqa: E402
from schemas.settings import DEMO_MODEL_DIR, Settings  # noqa: E402

# The seed's metrics object, as /v1/chat, the stream's done event and the OpenAI ``metrics``
# field all carry it.
METRIC_KEYS = {
    "ttft",
    "total_latency",
    "tokens_per_second",
    "output_tokens_per_second",
    "input_tokens",
    "output_tokens",
    "tpot",
    "model",
}


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    return DEMO_MODEL_DIR


def make_client(**overrides: Any) -> TestClient:
    settings = Settings(model_dir=DEMO_MODEL_DIR, **overrides)
    return TestClient(create_app(settings))


def wait_ready(client: TestClient, timeout: float = 60.0) -> None:
    service = client.app.state.service  # type: ignore[attr-defined]
    assert service.scheduler.loaded.wait(timeout), "model did not load in time"
    assert service.status == "ok", f"model failed to load: {service.scheduler.load_error}"


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    with make_client() as c:
        wait_ready(c)
        yield c


class DirectGenerator:
    """The oracle: a plain og.Generator loop on the same model, outside the server."""

    def __init__(self, model_dir: Path) -> None:
        import onnxruntime_genai as og

        self.og = og
        self.model = og.Model(str(model_dir))
        self.tokenizer = og.Tokenizer(self.model)

    def chat_prompt(self, messages: list[dict[str, str]]) -> str:
        return str(
            self.tokenizer.apply_chat_template(json.dumps(messages), add_generation_prompt=True)
        )

    def greedy(self, prompt: str, max_new_tokens: int) -> tuple[str, list[int]]:
        ids = self.tokenizer.encode(prompt)
        params = self.og.GeneratorParams(self.model)
        params.set_search_options(max_length=len(ids) + max_new_tokens, do_sample=False)
        gen = self.og.Generator(self.model, params)
        gen.append_tokens(ids)
        stream = self.tokenizer.create_stream()
        eos = set(self.tokenizer.eos_token_ids)
        text, tokens = "", list[int]()
        while len(tokens) < max_new_tokens and not gen.is_done():
            gen.generate_next_token()
            tok = int(gen.get_next_tokens()[0])
            if tok in eos:
                break
            tokens.append(tok)
            text += stream.decode(tok)
        return text, tokens


@pytest.fixture(scope="session")
def oracle(demo_model_dir: Path) -> DirectGenerator:
    return DirectGenerator(demo_model_dir)


def parse_sse(lines: Iterator[str]) -> list[str]:
    """The ``data:`` payloads of an SSE stream, in order (comments and blanks skipped)."""
    payloads, buf = [], []
    for line in lines:
        if line.startswith("data:"):
            buf.append(line[5:].removeprefix(" "))
        elif line == "" and buf:
            payloads.append("\n".join(buf))
            buf = []
    if buf:
        payloads.append("\n".join(buf))
    return payloads
