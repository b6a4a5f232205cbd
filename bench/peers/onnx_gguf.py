"""An onnxruntime-genai model folder's own weights as a llama.cpp GGUF, for llama-server.

The demo model has no Hugging Face checkpoint beside it (it was trained and built in one go),
so the GGUF is written from its ONNX graph: the int4 ``MatMulNBits`` weights dequantized
(``modelkit/dequantize.py``: the exact values the int4 kernels use), the fused
``qkv_proj`` split into q, k and v, q and k rows permuted as llama.cpp's own converter does
for Hugging Face's rotary layout (``rotary_interleaved=0``), the rotary base read off the
``cos_cache``, and the byte-level BPE tokenizer (``tokenizer.json``) as GGUF's ``gpt2`` kind.
Written as f32 (the dequantized values exactly), then quantized to Q4_0 by ``llama-quantize``,
whose blocks (32 values along the input dimension, one scale, zero point 8) are the int4
model's own layout, so the values stay the same but for the scale rounded to f16.

llama.cpp's ``llama`` architecture has no sliding window: the two compute the same only for
sequences within the demo model's 512-token window, which the benchmark's stay in.

    python -m bench.peers.onnx_gguf models/demo-llama out.gguf
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def _fp32_weights(folder: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Every initializer of the folder's graph, int4 ones dequantized, and the graph's
    attention and norm attributes."""
    import onnx
    from onnx import helper, numpy_helper

    from modelkit.dequantize import dequantize

    with tempfile.TemporaryDirectory() as tmp:
        dequantize(folder, Path(tmp))
        model = onnx.load(str(Path(tmp) / "model.onnx"))
        weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    attrs: dict[str, Any] = {}
    for node in model.graph.node:
        values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "GroupQueryAttention":
            attrs["attention"] = values
            if values.get("rotary_interleaved"):
                raise SystemExit("interleaved rotary embeddings are not supported")
        elif node.op_type in ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"):
            attrs["epsilon"] = values["epsilon"]
    return weights, attrs


def _one(weights: dict[str, np.ndarray], *parts: str) -> np.ndarray:
    """The one initializer whose name holds every part (e.g. ``layers.0.``, ``o_proj``)."""
    found = [name for name in weights if all(p in name for p in parts)]
    if len(found) != 1:
        raise SystemExit(f"expected one weight named like {parts}, found {found}")
    return weights[found[0]]


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Hugging Face's rotary halves to llama.cpp's interleaved pairs, per head (llama.cpp's
    ``convert_hf_to_gguf.py``, ``LlamaModel.permute``)."""
    shape = rows.shape
    return rows.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def rope_base(cos: np.ndarray, sin: np.ndarray, rotary_dim: int) -> float:
    """The rotary base: position 1's angle for pair 1 is ``base ** (-2 / rotary_dim)``."""
    angle = float(np.arctan2(sin[1, 1], cos[1, 1]))
    return math.exp(-math.log(angle) * rotary_dim / 2)


def write_gguf(folder: Path, out: Path) -> Path:
    """Write ``folder``'s weights and tokenizer as an f32 GGUF at ``out``."""
    import gguf

    config = json.loads((folder / "genai_config.json").read_text())["model"]
    decoder = config["decoder"]
    heads, kv_heads = decoder["num_attention_heads"], decoder["num_key_value_heads"]
    head_size, hidden = decoder["head_size"], decoder["hidden_size"]
    layers = decoder["num_hidden_layers"]
    weights, attrs = _fp32_weights(folder)
    cos, sin = weights["cos_cache"], weights["sin_cache"]
    embed = _one(weights, "embed_tokens")
    vocab = embed.shape[0]

    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(folder.name)
    writer.add_context_length(min(int(config["context_length"]), cos.shape[0]))
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(int(_one(weights, "layers.0.", "up_proj").shape[1]))
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(2 * cos.shape[1])
    writer.add_rope_freq_base(rope_base(cos, sin, 2 * cos.shape[1]))
    writer.add_layer_norm_rms_eps(float(attrs["epsilon"]))
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _tokenizer(writer, folder, config, vocab)

    def add(name: str, array: np.ndarray) -> None:
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))

    add("token_embd.weight", embed)
    for i in range(layers):
        prefix, blk = f"layers.{i}.", f"blk.{i}."
        add(blk + "attn_norm.weight", _one(weights, prefix, "input_layernorm"))
        add(blk + "ffn_norm.weight", _one(weights, prefix, "post_attention_layernorm"))
        qkv = _one(weights, prefix, "qkv_proj").T  # [out, in], as Hugging Face stores it
        q, k = heads * head_size, kv_heads * head_size
        add(blk + "attn_q.weight", permute(qkv[:q], heads))
        add(blk + "attn_k.weight", permute(qkv[q : q + k], kv_heads))
        add(blk + "attn_v.weight", qkv[q + k :])
        add(blk + "attn_output.weight", _one(weights, prefix, "o_proj").T)
        for ours, theirs in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up")):
            add(blk + theirs + ".weight", _one(weights, prefix, ours).T)
        add(blk + "ffn_down.weight", _one(weights, prefix, "down_proj").T)
    add("output_norm.weight", _one(weights, f"layers.{layers}.", "norm"))
    add("output.weight", _one(weights, "lm_head").T)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _tokenizer(writer: Any, folder: Path, config: dict[str, Any], vocab: int) -> None:
    """The byte-level BPE of ``tokenizer.json`` as GGUF's ``gpt2`` tokenizer (its tokens in
    the byte-level alphabet, added tokens as control tokens)."""
    import gguf

    spec = json.loads((folder / "tokenizer.json").read_text())
    if spec["model"]["type"] != "BPE":
        raise SystemExit(f"only BPE tokenizers are supported, not {spec['model']['type']}")
    tokens = [f"[PAD{i}]" for i in range(vocab)]
    types = [gguf.TokenType.UNUSED] * vocab
    for text, i in spec["model"]["vocab"].items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for added in spec.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        types[added["id"]] = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(int(config["bos_token_id"]))
    eos = config["eos_token_id"]
    writer.add_eos_token_id(int(eos[0] if isinstance(eos, list) else eos))
    writer.add_pad_token_id(int(config.get("pad_token_id", config["bos_token_id"])))
    writer.add_add_bos_token(False)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    write_gguf(args.folder, args.out)


if __name__ == "__main__":
    main()
