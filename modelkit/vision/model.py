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

    python -m modelkit.vision --out tests/hub_models/qwen2.5-vl
    python -m modelkit.vision --out tests/hub_models/qwen2.5-vl --check
"""

from __future__ import annotations

import json
from pathlib import Path

from modelkit.builder import draw_biases
from modelkit.tokenizer import corpus, train_chatml_tokenizer

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
    train_chatml_tokenizer(corpus(), 1024, CHAT_TEMPLATE, out_dir, SPECIAL_TOKENS)


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
    draw_biases(model, init_range)
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
