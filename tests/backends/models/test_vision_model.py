"""The committed Qwen2.5-VL test model (scripts/build_vision_model.py) runs on onnxruntime-genai's
own multimodal path and gives Hugging Face generate()'s greedy tokens, recorded at build time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schemas.settings import REPO_ROOT

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
    assert [c["image_tokens"] for c in EXPECTED["cases"]] == [4, 12, 0]
