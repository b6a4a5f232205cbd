"""The Qwen2.5-VL test model's record: Hugging Face generate() (greedy) on every case, and the
same cases through onnxruntime-genai, which must match it token for token."""

from __future__ import annotations

import json
from pathlib import Path

from modelkit.vision.model import CASES, MAX_NEW_TOKENS, MERGE, hf_preprocessor_config


def oracle(hf_dir: Path, images_dir: Path) -> dict[str, object]:
    """Hugging Face generate(), greedy, on every case."""
    import torch
    import transformers
    from PIL import Image
    from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(hf_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    processor = Qwen2VLImageProcessorPil(**hf_preprocessor_config())
    image_token = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    cases = []
    for case in CASES:
        prompt = tokenizer.apply_chat_template(
            case["messages"], tokenize=False, add_generation_prompt=True
        )
        kwargs: dict[str, object] = {}
        if case["images"]:
            pics = [Image.open(images_dir / name).convert("RGB") for name in case["images"]]  # type: ignore[union-attr]
            proc = processor(images=pics, return_tensors="pt")
            grids = proc["image_grid_thw"]
            # Expand each placeholder to its image's token count, as the processor does.
            parts = prompt.split("<|image_pad|>")
            prompt = parts[0]
            for g, rest in zip(grids.tolist(), parts[1:], strict=True):
                prompt += "<|image_pad|>" * (g[0] * g[1] * g[2] // (MERGE * MERGE)) + rest
            kwargs = {"pixel_values": proc["pixel_values"], "image_grid_thw": grids}
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        if kwargs:
            # What Qwen2.5-VL's processor adds: 1 marks an image token (M-RoPE positions).
            kwargs["mm_token_type_ids"] = (ids == image_token).to(torch.int64)
        with torch.no_grad():
            gen = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=MAX_NEW_TOKENS,
                min_new_tokens=MAX_NEW_TOKENS,
                do_sample=False,
                **kwargs,
            )
        new = gen[0, ids.shape[1] :].tolist()
        cases.append(
            {
                "name": case["name"],
                "images": case["images"],
                "messages": case["messages"],
                "prompt_ids": ids[0].tolist(),
                "image_tokens": int((ids[0] == image_token).sum()),
                "generated_ids": new,
                "text": tokenizer.decode(new),
            }
        )
    return {
        "oracle": f"transformers {transformers.__version__} generate(), greedy, fp32",
        "max_new_tokens": MAX_NEW_TOKENS,
        "cases": cases,
    }


def check_og(out: Path, expected: dict[str, object]) -> list[str]:
    """The same cases through a plain og.Generator loop: the differences, if any."""
    import onnxruntime_genai as og

    model = og.Model(str(out))
    proc = model.create_multimodal_processor()
    tokenizer = og.Tokenizer(model)
    problems = []
    for case in expected["cases"]:  # type: ignore[union-attr]
        prompt = tokenizer.apply_chat_template(
            json.dumps(case["messages"]), add_generation_prompt=True
        )
        paths = [str(out / "images" / name) for name in case["images"]]
        images = og.Images.open(*paths) if paths else None
        inputs = proc(prompt, images=images)
        params = og.GeneratorParams(model)
        params.set_search_options(
            do_sample=False, max_length=len(case["prompt_ids"]) + MAX_NEW_TOKENS, min_length=0
        )
        gen = og.Generator(model, params)
        gen.set_inputs(inputs)
        got: list[int] = []
        while not gen.is_done() and len(got) < MAX_NEW_TOKENS:
            gen.generate_next_token()
            got.append(int(gen.get_next_tokens()[0]))
        want = case["generated_ids"][: len(got)]
        if got != want:
            problems.append(f"{case['name']}: og {got} != HF {case['generated_ids']}")
    return problems
