"""Build a tiny random-weight Qwen2.5-VL model folder for onnxruntime-genai, offline.

onnxruntime-genai (model type ``qwen2_5_vl``) runs a vision-language model as three ONNX
stages named in genai_config.json:

- ``vision.onnx``: ``pixel_values [patches, 3*2*14*14]`` and ``image_grid_thw [1, 3]`` to
  ``image_features [patches/4, hidden]`` (one image per run: og loops over the images);
- ``embedding.onnx``: ``input_ids [batch, seq]`` and ``image_features`` to
  ``inputs_embeds [batch, seq, hidden]``, each ``<|image_pad|>`` token's row replaced by the
  next image feature;
- ``model.onnx``: the text decoder, made by the official builder with
  ``--extra_options exclude_embeds=true`` (it takes ``inputs_embeds`` and 3-row M-RoPE
  ``position_ids``, which og computes from the image grid).

og's own processor (``processor_config.json``, onnxruntime-extensions) decodes, resizes,
normalizes and patches the image, and expands each ``<|vision_start|>`` in the prompt into
the right number of ``<|image_pad|>`` tokens.

The vision and embedding stages are exported with ``torch.onnx`` from wrappers over the
Hugging Face modules' own weights. The wrapper computes the vision rotary positions from the
grid with tensor ops (so one graph serves any image size) and runs plain full attention over
the image: this equals Hugging Face's windowed attention because the test model's window
(``window_size``) is wider than any image the processor lets through (``max_pixels``).

At build time the script records Hugging Face ``generate()`` (greedy) on the same weights, the
same image files and chat, in ``expected.json``; ``--check`` re-derives it. The server's
greedy output must equal it token for token.

Needs the build-time packages in requirements-build.txt (torch, transformers, onnx,
onnxruntime-genai, pillow).

    python scripts/build_vision_model.py --out tests/hub_models/qwen2.5-vl
    python scripts/build_vision_model.py --out tests/hub_models/qwen2.5-vl --check
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from modelkit.decoder import corpus  # noqa: E402

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2-VL's chat template (the one Qwen2.5-VL ships), without tools: content lists with
# {"type": "image"} parts become <|vision_start|><|image_pad|><|vision_end|>.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

PATCH = 14
MERGE = 2
TEMPORAL = 2
# The image sizes the processor lets through: at most MAX_PIXELS pixels, so at most
# MAX_PIXELS / (28*28) = 256 image tokens. WINDOW covers the longest side such an image can
# have (28 x 7168 px), so Hugging Face's window attention is one window: full attention.
MIN_PIXELS = 28 * 28 * 4
MAX_PIXELS = 28 * 28 * 256
WINDOW = PATCH * MERGE * 256
IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073]
IMAGE_STD = [0.26862954, 0.26130258, 0.27577711]

TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
}
VISION = {
    "depth": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "patch_size": PATCH,
    "spatial_merge_size": MERGE,
    "temporal_patch_size": TEMPORAL,
    "window_size": WINDOW,
    "fullatt_block_indexes": [1],
    "in_channels": 3,
}

# The oracle's cases: (name, image files, chat). Image files are written by make_images().
CASES: list[dict[str, object]] = [
    {
        "name": "one_image",
        "images": ["square.png"],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": "What is in the picture?"}],
            }
        ],
    },
    {
        "name": "two_images",
        "images": ["square.png", "wide.png"],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Compare"},
                    {"type": "image"},
                    {"type": "text", "text": "with"},
                    {"type": "image"},
                ],
            }
        ],
    },
    {
        "name": "across_turns",
        "images": ["wide.png", "square.png"],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}],
            },
            {"role": "assistant", "content": "A wide picture."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "And this one?"}, {"type": "image"}],
            },
        ],
    },
    {
        "name": "text_only",
        "images": [],
        "messages": [{"role": "user", "content": "Tell me a story about the river."}],
    },
]
MAX_NEW_TOKENS = 16


def make_images(out: Path) -> None:
    """Two small deterministic PNGs whose sides are multiples of 28 (the processor keeps
    them as they are: no resampling, so both processors see the same pixels)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    for name, (h, w) in {"square.png": (56, 56), "wide.png": (56, 112)}.items():
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([x * 255 // w, y * 255 // h, (x + y) * 255 // (h + w)], axis=-1)
        noise = rng.integers(0, 40, size=(h, w, 3))
        Image.fromarray(np.clip(base + noise, 0, 255).astype("uint8"), "RGB").save(out / name)


def train_tokenizer(out_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out_dir)


def token_ids(tokenizer) -> dict[str, int]:
    return {
        "image_token_id": tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        "video_token_id": tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        "vision_start_token_id": tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        "vision_end_token_id": tokenizer.convert_tokens_to_ids("<|vision_end|>"),
    }


def make_hf_folder(hf_dir: Path, seed: int, init_range: float) -> None:
    import torch
    from transformers import AutoTokenizer, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    hf_dir.mkdir(parents=True, exist_ok=True)
    train_tokenizer(hf_dir)
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    head_dim = TEXT["hidden_size"] // TEXT["num_attention_heads"]
    text_config = {
        **TEXT,
        "vocab_size": len(tokenizer),
        "rms_norm_eps": 1e-6,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            # M-RoPE: the rotary half-dimension split into temporal, height, width sections.
            "mrope_section": [head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16],
        },
        "initializer_range": init_range,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    config = Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config={
            **VISION,
            "out_hidden_size": TEXT["hidden_size"],
            "initializer_range": init_range,
        },
        **token_ids(tokenizer),
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            # Untrained norms are all ones and biases all zeros; the builder drops zero
            # biases. Draw them so the graphs keep every op.
            if name.endswith(".bias"):
                param.normal_(0.0, init_range)
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    (hf_dir / "preprocessor_config.json").write_text(json.dumps(hf_preprocessor_config(), indent=1))


def hf_preprocessor_config() -> dict[str, object]:
    return {
        "image_processor_type": "Qwen2VLImageProcessor",
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "rescale_factor": 1 / 255,
        "image_mean": IMAGE_MEAN,
        "image_std": IMAGE_STD,
        "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS,
        "patch_size": PATCH,
        "temporal_patch_size": TEMPORAL,
        "merge_size": MERGE,
    }


def og_processor_config() -> dict[str, object]:
    """onnxruntime-extensions' image pipeline, as og's Qwen2.5-VL processor expects it."""

    def op(name: str, type_: str, attrs: dict[str, object] | None = None) -> dict[str, object]:
        body: dict[str, object] = {"name": name, "type": type_}
        if attrs:
            body["attrs"] = attrs
        return {"operation": body}

    return {
        "processor": {
            "name": "qwen2_5_image_processor",
            "transforms": [
                op("decode_image", "DecodeImage", {"color_space": "RGB"}),
                op("convert_to_rgb", "ConvertRGB"),
                op(
                    "resize",
                    "Resize",
                    {
                        "width": 540,
                        "height": 360,
                        "smart_resize": 1,
                        "min_pixels": MIN_PIXELS,
                        "max_pixels": MAX_PIXELS,
                        "patch_size": PATCH,
                        "merge_size": MERGE,
                    },
                ),
                op("rescale", "Rescale", {"rescale_factor": 1 / 255}),
                op(
                    "normalize",
                    "Normalize",
                    {"mean": IMAGE_MEAN, "std": IMAGE_STD, "qwen2_5_vl": 1},
                ),
                op(
                    "patch_image",
                    "PatchImage",
                    {"patch_size": PATCH, "temporal_patch_size": TEMPORAL, "merge_size": MERGE},
                ),
            ],
        }
    }


def vision_wrapper(model):
    """HF's vision tower for one image, with grid-derived rotary positions computed in the
    graph and full attention over the image (see the module docstring)."""
    import torch
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import apply_rotary_pos_emb_vision

    visual = model.model.visual

    class Vision(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.visual = visual

        def forward(self, pixel_values: torch.Tensor, image_grid_thw: torch.Tensor) -> torch.Tensor:
            v = self.visual
            h = image_grid_thw[0, 1]
            w = image_grid_thw[0, 2]
            # Rows in (h/2, w/2, 2, 2) merge-block order, as the processor lays patches out.
            hh = torch.arange(h).reshape(-1, 1).expand(-1, w)
            ww = torch.arange(w).reshape(1, -1).expand(h, -1)
            blocks = (h // MERGE, MERGE, w // MERGE, MERGE)
            hpos = hh.reshape(blocks).permute(0, 2, 1, 3).reshape(-1)
            wpos = ww.reshape(blocks).permute(0, 2, 1, 3).reshape(-1)
            t = image_grid_thw[0, 0]
            pos = torch.stack([hpos, wpos], dim=-1).repeat(t, 1)
            x = v.patch_embed(pixel_values)
            cos, sin = v.rotary_pos_emb(x, pos)
            n = x.shape[0]
            for blk in v.blocks:
                a = blk.attn
                y = blk.norm1(x)
                q, k, val = a.qkv(y).reshape(n, 3, a.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
                q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)
                q, k, val = (z.transpose(0, 1).unsqueeze(0) for z in (q, k, val))
                att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * a.scaling, dim=-1)
                o = torch.matmul(att, val).transpose(1, 2).reshape(n, -1)
                x = x + a.proj(o)
                x = x + blk.mlp(blk.norm2(x))
            return v.merger(x)

    return Vision().eval()


def embedding_wrapper(model, image_token_id: int):
    import torch

    embed = model.model.language_model.embed_tokens

    class Embedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = embed

        def forward(self, input_ids: torch.Tensor, image_features: torch.Tensor) -> torch.Tensor:
            embeds = self.embed(input_ids)
            is_image = input_ids == image_token_id
            # The i-th image token (1-based) takes feature row i of `padded`, whose row 0 is a
            # zero row (so a run without image features gathers from a non-empty table). An
            # image token with no feature left (one the model generated) keeps its own
            # embedding, as in Hugging Face, where features replace prompt tokens only.
            index = torch.cumsum(is_image.to(torch.int64).reshape(-1), 0).reshape(input_ids.shape)
            use = is_image & (index <= image_features.shape[0])
            index = torch.where(use, index, torch.zeros_like(index))
            padded = torch.cat([torch.zeros(1, embeds.shape[-1]), image_features], 0)
            return torch.where(use.unsqueeze(-1), padded[index], embeds)

    return Embedding().eval()


def export_stages(hf_dir: Path, out: Path) -> None:
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(hf_dir).eval()
    ids = json.loads((hf_dir / "config.json").read_text())
    patch_dim = 3 * TEMPORAL * PATCH * PATCH
    grid = torch.tensor([[1, 4, 6]], dtype=torch.int64)
    pixels = torch.randn(24, patch_dim)
    n = torch.export.Dim("patches")
    torch.onnx.export(
        vision_wrapper(model),
        (pixels, grid),
        str(out / "vision.onnx"),
        input_names=["pixel_values", "image_grid_thw"],
        output_names=["image_features"],
        dynamic_shapes={"pixel_values": {0: n}, "image_grid_thw": None},
        dynamo=True,
        opset_version=18,
        external_data=False,
    )
    seq = torch.export.Dim("sequence_length")
    batch = torch.export.Dim("batch_size")
    feats = torch.export.Dim("num_image_tokens")
    input_ids = torch.tensor(
        [[1, ids["image_token_id"], ids["image_token_id"], 5]], dtype=torch.int64
    )
    torch.onnx.export(
        embedding_wrapper(model, ids["image_token_id"]),
        (input_ids, torch.randn(2, TEXT["hidden_size"])),
        str(out / "embedding.onnx"),
        input_names=["input_ids", "image_features"],
        output_names=["inputs_embeds"],
        dynamic_shapes={"input_ids": {0: batch, 1: seq}, "image_features": {0: feats}},
        dynamo=True,
        opset_version=18,
        external_data=False,
    )


def run_builder(hf_dir: Path, out: Path, cache_dir: Path) -> None:
    cmd = [
        sys.executable, "-m", "onnxruntime_genai.models.builder",
        "-i", str(hf_dir), "-o", str(out), "-p", "fp32", "-e", "cpu", "-c", str(cache_dir),
        "--extra_options", "hf_token=false", "exclude_embeds=true",
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


def write_genai_config(hf_dir: Path, out: Path) -> None:
    cfg = json.loads((out / "genai_config.json").read_text())
    ids = json.loads((hf_dir / "config.json").read_text())
    model = cfg["model"]
    model["type"] = "qwen2_5_vl"
    for key in ("image_token_id", "video_token_id", "vision_start_token_id"):
        model[key] = ids[key]
    model["embedding"] = {
        "filename": "embedding.onnx",
        "inputs": {"input_ids": "input_ids", "image_features": "image_features"},
        "outputs": {"inputs_embeds": "inputs_embeds"},
    }
    model["vision"] = {
        "filename": "vision.onnx",
        "config_filename": "processor_config.json",
        "spatial_merge_size": MERGE,
        "patch_size": PATCH,
        "window_size": WINDOW,
        "tokens_per_second": 2.0,
        "inputs": {"pixel_values": "pixel_values", "image_grid_thw": "image_grid_thw"},
        "outputs": {"image_features": "image_features"},
    }
    (out / "genai_config.json").write_text(json.dumps(cfg, indent=4) + "\n")
    (out / "processor_config.json").write_text(json.dumps(og_processor_config(), indent=2) + "\n")


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


def build(out: Path, seed: int, init_range: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        make_hf_folder(hf_dir, seed, init_range)
        out.mkdir(parents=True, exist_ok=True)
        run_builder(hf_dir, out, Path(tmp) / "cache")
        export_stages(hf_dir, out)
        write_genai_config(hf_dir, out)
        (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
        (out / "images").mkdir(exist_ok=True)
        make_images(out / "images")
        expected = oracle(hf_dir, out / "images")
        (out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
        if os.environ.get("KEEP_HF_DIR"):
            shutil.copytree(hf_dir, out / "hf", dirs_exist_ok=True)
        for leftover in ("model.onnx.data",):
            if (out / leftover).exists() and (out / leftover).stat().st_size == 0:
                (out / leftover).unlink()
    problems = check_og(out, expected)
    if problems:
        raise SystemExit("og differs from HF:\n" + "\n".join(problems))
    print(f"built {out}: og.Generator matches HF generate() on {len(expected['cases'])} cases")  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init-range", type=float, default=0.2)
    ap.add_argument("--check", action="store_true", help="only compare og with the recorded oracle")
    args = ap.parse_args()
    if args.check:
        expected = json.loads((args.out / "expected.json").read_text())
        problems = check_og(args.out, expected)
        print("\n".join(problems) or "og matches expected.json")
        raise SystemExit(1 if problems else 0)
    build(args.out, args.seed, args.init_range)


if __name__ == "__main__":
    main()
