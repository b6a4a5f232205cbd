"""Hub-layout model folders served for real: an Optimum export with no genai_config.json answers
exactly as Hugging Face generate() did on the same weights (recorded by
modelkit/optimum_model.py in expected.json), a variant repo serves its CPU variant, and a
folder that cannot be inferred stops the start with a clear message."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backends.config import Limits, ModelConfig, SchedulerName, ServiceConfig
from backends.core.request import ChatPrompt, GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.models.folder import inspect_model_folder
from backends.types import SamplingParams
from config.settings import REPO_ROOT
from tests.backends.models.test_variants import VARIANTS, make_variant
from tests.conftest import DirectGenerator, make_client, wait_ready

pytestmark = pytest.mark.model

OPTIMUM = REPO_ROOT / "tests" / "hub_models" / "optimum-llama"
EXPECTED: dict[str, Any] = json.loads((OPTIMUM / "expected.json").read_text())
CASES = [*EXPECTED["completions"], EXPECTED["chat"]]
N = EXPECTED["max_new_tokens"]


@pytest.fixture(scope="module", autouse=True)
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Inferred configs go to $XDG_CACHE_HOME: a temp folder here, not the user's cache."""
    old = os.environ.get("XDG_CACHE_HOME")
    path = tmp_path_factory.mktemp("xdg")
    os.environ["XDG_CACHE_HOME"] = str(path)
    yield path
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def prompt_of(case: dict[str, Any]) -> TextPrompt | ChatPrompt:
    return ChatPrompt(case["messages"]) if "messages" in case else TextPrompt(case["prompt"])


@pytest.mark.parametrize("scheduler", ["generator", "engine", "batch"])
def test_greedy_tokens_equal_hugging_face_generate(scheduler: SchedulerName) -> None:
    """Token ids, through the core; ``batch`` cannot run a non-shared KV cache and hands the
    model to the generator (it says so in the log)."""

    async def main() -> list[tuple[list[int], Any]]:
        cfg = ModelConfig(OPTIMUM, device="cpu", intra_op_threads=1, scheduler=scheduler)
        service = InferenceService(ServiceConfig(cfg, Limits()))
        await service.start()
        try:
            got = []
            for case in CASES:
                request = GenerationRequest(
                    prompt_of(case), SamplingParams(temperature=0.0), max_tokens=N
                )
                ids, finish = [], None
                async for piece in await service.submit(request):
                    if piece.token is not None:
                        ids.append(piece.token.token_id)
                    finish = piece.finish_reason or finish
                got.append((ids, finish))
            return got
        finally:
            await service.stop()

    got = asyncio.run(main())
    assert got == [(c["generated_ids"], c["finish_reason"]) for c in CASES]
    assert len({tuple(ids) for ids, _ in got}) == len(CASES)


def og_text(folder: Path, ids: list[int]) -> str:
    """The server's detokenizer (a tokenizer stream) over Hugging Face's tokens."""
    import onnxruntime_genai as og

    stream = og.Tokenizer(str(folder)).create_stream()
    return "".join(stream.decode(token) for token in ids)


def test_served_over_http_like_any_model() -> None:
    with make_client(model_dir=OPTIMUM, device="cpu") as client:
        wait_ready(client)
        cache = inspect_model_folder(OPTIMUM, provider="cpu").path  # the folder og loaded
        for case in EXPECTED["completions"]:
            body = {"prompt": case["prompt"], "max_tokens": N, "temperature": 0}
            data = client.post("/v1/completions", json=body).json()
            assert data["usage"]["prompt_tokens"] == len(case["prompt_ids"])
            assert data["usage"]["completion_tokens"] == len(case["generated_ids"])
            assert data["choices"][0]["text"] == og_text(cache, case["generated_ids"])
        chat = EXPECTED["chat"]
        body = {"messages": chat["messages"], "max_tokens": N, "temperature": 0}
        data = client.post("/v1/chat/completions", json=body).json()
        assert data["usage"]["prompt_tokens"] == len(chat["prompt_ids"])
        assert data["choices"][0]["message"]["content"] == og_text(cache, chat["generated_ids"])
        models = client.get("/v1/models").json()["data"]
        assert models[0]["context_length"] == 2048


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="re-deriving expected.json needs torch and transformers (requirements-build.txt)",
)
def test_expected_outputs_are_hugging_face_generate_on_the_committed_weights() -> None:
    from modelkit.optimum_model import expected_outputs

    derived = expected_outputs(OPTIMUM, N)
    for key in ("completions", "chat"):
        assert derived[key] == EXPECTED[key]


@pytest.fixture(scope="module")
def variant_repo(tmp_path_factory: pytest.TempPathFactory, demo_model_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("repo") / "Phi-3-mini-4k-instruct-onnx"
    for rel, options in VARIANTS.items():
        make_variant(demo_model_dir, root / rel, options)
    # The other variants must not be what answers: break them.
    for rel in VARIANTS:
        if not rel.endswith("acc-level-4"):
            (root / rel / "model.onnx").unlink()
            (root / rel / "model.onnx").write_bytes(b"not a model")
    return root


def test_a_variant_repo_serves_its_cpu_variant(variant_repo: Path, oracle: DirectGenerator) -> None:
    prompt = "the river and the mountain"
    expected, _ = oracle.greedy(prompt, 12)
    with make_client(model_dir=variant_repo, device="cpu") as client:
        wait_ready(client)
        body = {"prompt": prompt, "max_tokens": 12, "temperature": 0}
        data = client.post("/v1/completions", json=body).json()
    assert data["choices"][0]["text"] == expected


def test_a_folder_that_cannot_be_inferred_stops_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from main_genai import main

    folder = tmp_path / "t5-onnx"
    (folder / "onnx").mkdir(parents=True)
    for name in ("encoder_model.onnx", "decoder_model_merged.onnx"):
        shutil.copy(OPTIMUM / "onnx" / "model.onnx", folder / "onnx" / name)
    assert main(["--model-dir", str(folder), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "has no genai_config.json, and none can be inferred" in err
    assert "encoder-decoder" in err and "Traceback" not in err


def ort_greedy(model_file: Path, prompt_ids: list[int], n: int) -> list[int]:
    """The oracle for a quantized file: a plain onnxruntime loop over the same graph."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    kv = [f"past_key_values.{i}.{k}" for i in range(2) for k in ("key", "value")]
    past = {name: np.zeros((1, 1, 0, 16), np.float32) for name in kv}
    out: list[int] = []
    current, total = list(prompt_ids), 0
    while len(out) < n:
        length = total + len(current)
        feeds = {
            "input_ids": np.array([current], np.int64),
            "attention_mask": np.ones((1, length), np.int64),
            "position_ids": np.arange(total, length, dtype=np.int64)[None],
            **past,
        }
        result = dict(zip(names, session.run(None, feeds), strict=True))
        out.append(int(result["logits"][0, -1].argmax()))
        past = {name: result[name.replace("past_key_values", "present")] for name in kv}
        current, total = [out[-1]], length
    return out


@pytest.mark.skipif(
    importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnx_ir") is None,
    reason="quantizing the test export needs onnx and onnx-ir (requirements-build.txt)",
)
def test_q4_and_quantized_files_serve_like_onnxruntime(tmp_path: Path) -> None:
    """transformers.js repos hold model_q4.onnx (MatMulNBits) and model_quantized.onnx (int8):
    made here from the fp32 export, each served and compared with onnxruntime on that file."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    repo = tmp_path / "repo"
    shutil.copytree(OPTIMUM, repo)
    quantizer = MatMulNBitsQuantizer(onnx.load(str(repo / "onnx" / "model.onnx")), block_size=16)
    quantizer.process()
    quantizer.model.save_model_to_file(str(repo / "onnx" / "model_q4.onnx"), False)
    quantize_dynamic(
        repo / "onnx" / "model.onnx",
        repo / "onnx" / "model_quantized.onnx",
        weight_type=QuantType.QUInt8,
    )
    case = EXPECTED["completions"][1]
    for pin, file in ((None, "model_q4.onnx"), ("model_quantized", "model_quantized.onnx")):
        folder = inspect_model_folder(repo, provider="cpu", variant=pin, cache_dir=tmp_path / "c")
        assert folder.config["model"]["decoder"]["filename"] == f"onnx/{file}"
        _, tokens = DirectGenerator(folder.path).greedy(case["prompt"], 16)
        assert tokens == ort_greedy(repo / "onnx" / file, case["prompt_ids"], 16)
