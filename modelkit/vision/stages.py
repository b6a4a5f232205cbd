"""The Qwen2.5-VL test model's ONNX stages beside the builder's decoder: the vision and embedding
graphs (torch.onnx from wrappers over the Hugging Face modules' weights), and the
genai_config.json and processor_config.json that name them (see modelkit/vision/model.py)."""

from __future__ import annotations

import json
from pathlib import Path

from modelkit.vision.model import (
    IMAGE_MEAN,
    IMAGE_STD,
    MAX_PIXELS,
    MERGE,
    MIN_PIXELS,
    PATCH,
    TEMPORAL,
    TEXT,
    WINDOW,
)


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
