"""The committed Qwen2.5-VL test model (modelkit/vision/) runs on onnxruntime-genai's
own multimodal path and gives Hugging Face generate()'s greedy tokens, recorded at build time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config.settings import REPO_ROOT

pytestmark = pytest.mark.model

VISION = REPO_ROOT / "tests" / "hub_models" / "qwen2.5-vl"
EXPECTED: dict[str, Any] = json.loads((VISION / "expected.json").read_text())


def og_greedy(folder: Path, case: dict[str, Any], n: int) -> tuple[list[int], list[int]]:
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    processor = model.create_multimodal_processor()
    prompt = tokenizer.apply_chat_template(json.dumps(case["messages"]), add_generation_prompt=True)
    images = (
        og.Images.open(*[str(folder / "images" / f) for f in case["images"]])
        if case["images"]
        else None
    )
    inputs = processor(prompt, images=images)
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(case["prompt_ids"]) + n)
    gen = og.Generator(model, params)
    gen.set_inputs(inputs)
    out: list[int] = []
    while not gen.is_done() and len(out) < n:
        gen.generate_next_token()
        out.append(int(gen.get_next_tokens()[0]))
    prompt_ids = [int(t) for t in inputs["input_ids"].as_numpy().ravel()]
    return prompt_ids, out


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=[c["name"] for c in EXPECTED["cases"]])
def test_og_generator_equals_hugging_face(case: dict[str, Any]) -> None:
    prompt_ids, out = og_greedy(VISION, case, EXPECTED["max_new_tokens"])
    assert prompt_ids == case["prompt_ids"]
    assert out == case["generated_ids"]


def test_the_image_changes_the_answer() -> None:
    """The oracle's cases are not all one answer: the pixels reach the decoder."""
    answers = {tuple(c["generated_ids"]) for c in EXPECTED["cases"]}
    assert len(answers) == len(EXPECTED["cases"])
    assert [c["image_tokens"] for c in EXPECTED["cases"]] == [4, 12, 12, 0]


def image_inputs(case: dict[str, Any]) -> list[Any]:
    from backends.media import ImageLimits, decode_image

    return [
        decode_image((VISION / "images" / name).read_bytes(), f"image {i}", ImageLimits())
        for i, name in enumerate(case["images"])
    ]


async def run_case(service: Any, case: dict[str, Any], images: list[Any]) -> tuple[list[int], Any]:
    from backends.core.request import ChatPrompt, GenerationRequest
    from backends.types import SamplingParams

    request = GenerationRequest(
        ChatPrompt(case["messages"], images=images),
        SamplingParams(temperature=0.0),
        max_tokens=EXPECTED["max_new_tokens"],
    )
    handle = await service.submit(request)
    result = await handle.result()
    return [t.token_id for t in result.choices[0].tokens], result.usage


def test_the_service_gives_the_oracle_tokens_and_counts_image_tokens() -> None:
    """Through the core (the generator strategy), twice: the second round reuses the held
    prefixes (same images) and must still give the oracle's tokens."""
    import asyncio

    from backends.config import Limits, ModelConfig, ServiceConfig
    from backends.core.service import InferenceService

    async def main() -> list[tuple[list[int], Any]]:
        cfg = ModelConfig(VISION, device="cpu", intra_op_threads=1)
        service = InferenceService(ServiceConfig(cfg, Limits()))
        await service.start()
        try:
            assert service.strategy_name == "generator"
            return [
                await run_case(service, case, image_inputs(case))
                for _ in range(2)
                for case in EXPECTED["cases"]
            ]
        finally:
            await service.stop()

    got = asyncio.run(main())
    cases = EXPECTED["cases"] * 2
    assert [ids for ids, _ in got] == [c["generated_ids"] for c in cases]
    assert [u.image_tokens for _, u in got] == [c["image_tokens"] for c in cases]
    assert [u.prompt_tokens for _, u in got] == [len(c["prompt_ids"]) for c in cases]
    first = len(EXPECTED["cases"])
    assert all(u.cached_tokens == 0 for _, u in got[:first])
    assert all(u.cached_tokens > 0 for _, u in got[first:])


def test_a_prefix_is_never_reused_across_different_images() -> None:
    """Same chat, another image of the same size: the held sequence of the first image must
    not be reused (its image tokens are the same ids), and the answer is the other image's."""
    import asyncio
    import io

    from PIL import Image

    from backends.config import Limits, ModelConfig, ServiceConfig
    from backends.core.service import InferenceService
    from backends.media import ImageLimits, decode_image

    case = EXPECTED["cases"][0]
    flipped = io.BytesIO()
    Image.open(VISION / "images" / "square.png").transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(
        flipped, format="PNG"
    )
    other = [decode_image(flipped.getvalue(), "image 0", ImageLimits())]

    async def main() -> list[tuple[list[int], Any]]:
        cfg = ModelConfig(VISION, device="cpu", intra_op_threads=1)
        service = InferenceService(ServiceConfig(cfg, Limits()))
        await service.start()
        try:
            first = await run_case(service, case, image_inputs(case))
            second = await run_case(service, case, other)
            fresh = InferenceService(ServiceConfig(cfg, Limits()))
            await fresh.start()
            try:
                alone = await run_case(fresh, case, other)
            finally:
                await fresh.stop()
            return [first, second, alone]
        finally:
            await service.stop()

    first, second, alone = asyncio.run(main())
    assert first[0] == case["generated_ids"]
    assert second[1].cached_tokens == 0
    assert second[0] == alone[0] != first[0]


def test_an_image_token_without_a_feature_keeps_its_own_embedding() -> None:
    """A generated <|image_pad|> (decode steps have no image features) is embedded like any
    token, as in Hugging Face; with features, the i-th image token takes row i."""
    import numpy as np
    import onnxruntime as ort

    config = json.loads((VISION / "genai_config.json").read_text())["model"]
    image = config["image_token_id"]
    session = ort.InferenceSession(str(VISION / "embedding.onnx"))
    ids = np.array([[7, image, 9, image]], dtype=np.int64)
    none = np.zeros((0, 64), dtype=np.float32)
    [plain] = session.run(None, {"input_ids": ids, "image_features": none})
    [again] = session.run(None, {"input_ids": np.array([[image]]), "image_features": none})
    np.testing.assert_array_equal(plain[0, 1], again[0, 0])
    feats = np.arange(2 * 64, dtype=np.float32).reshape(2, 64)
    [mixed] = session.run(None, {"input_ids": ids, "image_features": feats})
    np.testing.assert_array_equal(mixed[0, [1, 3]], feats)
    np.testing.assert_array_equal(mixed[0, [0, 2]], plain[0, [0, 2]])
    [one] = session.run(None, {"input_ids": ids, "image_features": feats[:1]})
    np.testing.assert_array_equal(one[0, 1], feats[0])
    np.testing.assert_array_equal(one[0, 3], plain[0, 3])


def test_expected_json_is_re_derived_from_the_seeded_weights(tmp_path: Path) -> None:
    """Where the build-time packages are installed: the random-init model made again from
    its seed, and Hugging Face generate() on it, give the committed record."""
    for module in ("torch", "transformers", "tokenizers"):
        pytest.importorskip(module, reason="re-deriving needs requirements-build.txt")
    from modelkit.vision.model import make_hf_folder
    from modelkit.vision.oracle import oracle

    make_hf_folder(tmp_path / "hf", seed=1234, init_range=0.2)
    again = oracle(tmp_path / "hf", VISION / "images")
    assert again["cases"] == EXPECTED["cases"]
