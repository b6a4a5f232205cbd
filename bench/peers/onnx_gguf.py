"""An onnxruntime-genai model folder's own weights as a llama.cpp GGUF, for llama-server.

The demo model has no Hugging Face checkpoint beside it (it was trained and built in one go),
so the GGUF is written from its ONNX graph, read back as Hugging Face's weights by
``modelkit/onnx_weights.py`` (the int4 ``MatMulNBits`` weights dequantized: the exact values
the int4 kernels use; the fused ``qkv_proj`` split into q, k and v; the rotary base read off
the ``cos_cache``): q and k rows permuted as llama.cpp's own converter does for Hugging
Face's rotary layout, and the byte-level BPE tokenizer (``tokenizer.json``) as GGUF's
``gpt2`` kind.
Written as f32 (the dequantized values exactly), then quantized to Q4_0 by ``llama-quantize``,
whose blocks (32 values along the input dimension, one scale, zero point 8) are the int4
model's own layout, so the values stay the same but for the scale rounded to f16.

llama.cpp's ``llama`` architecture has no sliding window: the two compute the same only for
sequences within the demo model's 512-token window, which the benchmark's stay in.

    python -m bench.peers.onnx_gguf models/demo-llama out.gguf
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Hugging Face's rotary halves to llama.cpp's interleaved pairs, per head (llama.cpp's
    ``convert_hf_to_gguf.py``, ``LlamaModel.permute``)."""
    shape = rows.shape
    return rows.reshape(heads, 2, shape[0] // heads // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def write_gguf(folder: Path, out: Path) -> Path:
    """Write ``folder``'s weights and tokenizer as an f32 GGUF at ``out``."""
    import gguf

    from modelkit.onnx_weights import read_decoder

    config = json.loads((folder / "genai_config.json").read_text())["model"]
    shape, weights = read_decoder(folder)  # Hugging Face's names and [out, in] layout
    heads, kv_heads = shape["num_attention_heads"], shape["num_key_value_heads"]
    layers = shape["num_hidden_layers"]
    embed = weights["model.embed_tokens.weight"]
    vocab = embed.shape[0]

    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(folder.name)
    writer.add_context_length(min(int(config["context_length"]), shape["max_position_embeddings"]))
    writer.add_embedding_length(shape["hidden_size"])
    writer.add_block_count(layers)
    writer.add_feed_forward_length(shape["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(shape["head_dim"])
    writer.add_rope_freq_base(shape["rope_theta"])
    writer.add_layer_norm_rms_eps(shape["rms_norm_eps"])
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _tokenizer(writer, folder, config, vocab)

    def add(name: str, array: np.ndarray) -> None:
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))

    add("token_embd.weight", embed)
    for i in range(layers):
        ours, blk = f"model.layers.{i}.", f"blk.{i}."
        add(blk + "attn_norm.weight", weights[ours + "input_layernorm.weight"])
        add(blk + "ffn_norm.weight", weights[ours + "post_attention_layernorm.weight"])
        add(blk + "attn_q.weight", permute(weights[ours + "self_attn.q_proj.weight"], heads))
        add(blk + "attn_k.weight", permute(weights[ours + "self_attn.k_proj.weight"], kv_heads))
        add(blk + "attn_v.weight", weights[ours + "self_attn.v_proj.weight"])
        add(blk + "attn_output.weight", weights[ours + "self_attn.o_proj.weight"])
        for proj in ("gate", "up", "down"):
            add(f"{blk}ffn_{proj}.weight", weights[f"{ours}mlp.{proj}_proj.weight"])
    add("output_norm.weight", weights["model.norm.weight"])
    add("output.weight", weights.get("lm_head.weight", embed))  # tied: the embedding
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
