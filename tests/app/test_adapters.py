"""LoRA adapters served as model ids (tests/models/demo-lora, made by modelkit/adapter.py):
an adapter request equals a plain og.Generator loop with that adapter active, base requests in
between (also concurrent ones) are unaffected, and prefix reuse never crosses adapters."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.request import GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.types import SamplingParams
from config.settings import REPO_ROOT
from tests.conftest import assert_error, make_client, wait_loaded, wait_ready

pytestmark = pytest.mark.model

FOLDER = REPO_ROOT / "tests" / "models" / "demo-lora"
ADAPTERS = {name: FOLDER / f"{name}.onnx_adapter" for name in ("pirate", "poet")}
PROMPT = "The river runs to the city and the"
N = 16


def og_greedy(prompt: str, adapter: str | None, n: int = N) -> list[int]:
    """The oracle: a plain og.Generator loop on the folder, with ``adapter`` active."""
    import onnxruntime_genai as og

    model = og.Model(str(FOLDER))
    tokenizer = og.Tokenizer(model)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=256, do_sample=False)
    gen = og.Generator(model, params)
    if adapter is not None:
        adapters = og.Adapters(model)
        adapters.load(str(ADAPTERS[adapter]), adapter)
        gen.set_active_adapter(adapters, adapter)
    gen.append_tokens(tokenizer.encode(prompt))
    eos, out = set(tokenizer.eos_token_ids), list[int]()
    while len(out) < n and not gen.is_done():
        gen.generate_next_token()
        token = int(gen.get_next_tokens()[0])
        if token in eos:
            break
        out.append(token)
    return out


def models_file(tmp_path: Path, scheduler: str = "generator") -> Path:
    adapters = ", ".join(f'{name} = "{path}"' for name, path in ADAPTERS.items())
    path = tmp_path / "models.toml"
    path.write_text(
        f'[[models]]\nname = "lora"\npath = "{FOLDER}"\nscheduler = "{scheduler}"\n'
        f"adapters = {{ {adapters} }}\n"
    )
    return path


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with make_client(models_file=models_file(tmp_path_factory.mktemp("lora"))) as c:
        wait_ready(c)
        yield c


def complete(client: TestClient, model: str, prompt: str = PROMPT) -> dict[str, Any]:
    body = {"model": model, "prompt": prompt, "max_tokens": N, "temperature": 0}
    resp = client.post("/v1/completions", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize("model", ["lora", "pirate", "poet"])
def test_each_id_equals_og_with_that_adapter(client: TestClient, model: str) -> None:
    adapter = None if model == "lora" else model
    expected = og_greedy(PROMPT, adapter)
    body = complete(client, model)
    assert body["model"] == model and body["usage"]["completion_tokens"] == len(expected)
    oracle_text = client.post("/detokenize", json={"tokens": expected}).json()["prompt"]
    assert body["choices"][0]["text"] == oracle_text


def test_adapters_change_the_output(client: TestClient) -> None:
    texts = {m: complete(client, m)["choices"][0]["text"] for m in ("lora", "pirate", "poet")}
    assert len(set(texts.values())) == 3


def test_concurrent_base_and_adapter_requests_do_not_leak() -> None:
    """Base and adapter sequences interleaved step by step on one owner thread."""
    prompts = [PROMPT, "hello world, the model server answers the question of the", "1 + 2 = 3"]
    models = [None, "pirate", "poet", None, "poet", "pirate"]
    cases = [(m, prompts[i % 3]) for i, m in enumerate(models)]
    config = ServiceConfig(
        ModelConfig(FOLDER, name="lora", device="cpu", scheduler="generator", adapters=ADAPTERS),
        Limits(max_concurrency=8),
    )

    async def body() -> list[list[int]]:
        service = InferenceService(config)
        await service.start()
        try:
            handles = [
                await service.submit(
                    GenerationRequest(TextPrompt(p), SamplingParams(), max_tokens=N, model=m)
                )
                for m, p in cases
            ]
            results = await asyncio.gather(*(h.result() for h in handles))
            return [[t.token_id for t in r.choices[0].tokens] for r in results]
        finally:
            await service.stop()

    got = asyncio.run(body())
    assert got == [og_greedy(p, m) for m, p in cases]


def test_prefix_reuse_never_crosses_adapters(client: TestClient) -> None:
    prompt = "a shared prefix for the reuse test, long enough to matter " * 3
    assert (
        complete(client, "pirate", prompt)["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    )
    # The same prompt again: the base model and the other adapter must not reuse pirate's cache.
    for model in ("lora", "poet"):
        usage = complete(client, model, prompt)["usage"]
        assert usage["prompt_tokens_details"]["cached_tokens"] == 0
    again = complete(client, "pirate", prompt + " more")["usage"]
    assert again["prompt_tokens_details"]["cached_tokens"] > 10  # its own cache, reused


def test_adapters_are_listed_under_their_model(client: TestClient) -> None:
    cards = {c["id"]: c for c in client.get("/v1/models").json()["data"]}
    assert cards["lora"]["parent"] is None
    assert cards["pirate"]["parent"] == "lora" and cards["poet"]["parent"] == "lora"


def test_the_batch_scheduler_hands_an_adapter_to_a_generator(tmp_path: Path) -> None:
    with make_client(models_file=models_file(tmp_path, "batch")) as c:
        wait_ready(c)
        assert c.get("/readyz").json()["scheduler"] == "batch"
        for model, adapter in (("lora", None), ("pirate", "pirate"), ("lora", None)):
            expected = c.post("/detokenize", json={"tokens": og_greedy(PROMPT, adapter)})
            assert complete(c, model)["choices"][0]["text"] == expected.json()["prompt"]


def test_the_engine_refuses_an_adapter(tmp_path: Path) -> None:
    with make_client(models_file=models_file(tmp_path, "engine")) as c:
        wait_ready(c)
        err = assert_error(
            c.post("/v1/completions", json={"model": "pirate", "prompt": PROMPT}), 400, "model"
        )
        assert "LoRA adapter is not supported by the 'engine' scheduler" in err["message"]


def test_a_missing_adapter_file_stops_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = models_file(tmp_path)
    path.write_text(path.read_text().replace("pirate.onnx_adapter", "nope.onnx_adapter"))
    with caplog.at_level(logging.ERROR, "genai.registry"), make_client(models_file=path) as c:
        assert wait_loaded(c, 30)["status"] == "error"
    assert any("nope.onnx_adapter" in r.getMessage() for r in caplog.records)
