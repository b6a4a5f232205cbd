"""A builder-made Llama-shaped decoder folder's weights back as a Hugging Face
``LlamaForCausalLM`` config and state dict, in float32 (int4 weights dequantized), so that a
committed model can be trained on: the copy model starts from the demo model
(modelkit/copy_model/train.py ``--base``).

What it reads is the builder's graph: a ``MatMul`` or ``MatMulNBits`` per projection, its
weight named ``model.layers.{i}.attn.qkv_proj.MatMul.weight...`` (q, k and v packed, in that
order) or ``...q_proj...`` and the rest, ``model.layers.{i}.mlp.{gate,up,down}_proj.MatMul...``,
``lm_head.MatMul...`` (modelkit/dequantize.py keeps those names); the token
embedding a ``Gather`` or ``GatherBlockQuantized``; the norms' weights as initializers named as
Hugging Face names them (the last one ``model.layers.{n}.final_norm_layernorm.weight``).
Anything else is refused, naming it: an op a Llama decoder has not (biases' ``Add``, another
activation than SiLU, another attention op), a ``Mul`` outside the MLP (Gemma's scaled
embedding), a weight nothing here reads (Qwen3's q and k norms), partial or interleaved
rotary. A sliding window is not carried over: what is trained on it must fit in the window.

Needs ``onnx`` (requirements-build.txt).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from modelkit.dequantize import nbits_matrix, quantized_table

_PROJECTION = re.compile(r"^(?:model\.layers\.(\d+)\.(attn|mlp)\.(\w+_proj)|(lm_head))\.MatMul\.")
_NORM = re.compile(r"^model\.layers\.(\d+)\.(input_layernorm|post_attention_layernorm)\.weight$")
_FINAL_NORM = re.compile(r"^model\.layers\.(\d+)\.final_norm_layernorm\.weight$")


def rope_base(cos: np.ndarray, sin: np.ndarray, rotary_dim: int) -> float:
    """The rotary base: position 1's angle for pair 1 is ``base ** (-2 / rotary_dim)``."""
    angle = float(np.arctan2(sin[1, 1], cos[1, 1]))
    return math.exp(-math.log(angle) * rotary_dim / 2)


def rope_theta(cos: np.ndarray, sin: np.ndarray) -> float:
    """The base of the rotary caches (``[positions, pairs]``), to three figures where that
    gives the caches (10000, 500000: they are float32); refused if no base gives them (a
    scaled rotary: Llama 3's, LongRoPE)."""
    pairs = cos.shape[1]
    read = rope_base(cos, sin, 2 * pairs)
    positions = np.arange(min(len(cos), 256), dtype=np.float64)[:, None]
    for base in (float(f"{read:.3g}"), read):
        angles = positions * base ** (-np.arange(pairs) / pairs)[None, :]
        if np.allclose(np.cos(angles), cos[: len(positions)], atol=1e-4) and np.allclose(
            np.sin(angles), sin[: len(positions)], atol=1e-4
        ):
            return base
    raise SystemExit("the rotary caches are not a plain base's (a scaled rotary)")


def _matrix(node: Any, weights: dict[str, np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """A projection's weight as Hugging Face's ``Linear`` holds it: ``[out, in]``."""
    if node.op_type == "MatMul":
        return np.ascontiguousarray(weights[node.input[1]].T)
    return nbits_matrix(node, weights, attrs)


def _embedding(node: Any, nodes: list[Any], weights: dict[str, np.ndarray], attrs: Any) -> Any:
    if node.op_type == "Gather":
        return weights[node.input[0]]
    return quantized_table(node, nodes, weights, attrs)


# The builder's Llama graph: the attention mask's subgraph, the embedding, the norms, the
# projections, the attention, and SiLU's Sigmoid and Muls.
_LLAMA_OPS = {
    "Constant", "ReduceSum", "Sub", "Cast", "Shape", "Gather", "GatherBlockQuantized", "Reshape",
    "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "MatMul", "MatMulNBits",
    "GroupQueryAttention", "Sigmoid", "Mul",
}  # fmt: skip


def _check_ops(nodes: list[Any], attributes: Any) -> None:
    for node in nodes:
        if node.op_type not in _LLAMA_OPS or (node.op_type == "Mul" and "/mlp/" not in node.name):
            raise SystemExit(f"{node.name}: a {node.op_type} is not in a Llama-shaped decoder")
        attrs = attributes(node)
        llama = attrs.get("do_rotary") and not attrs.get("rotary_interleaved")
        if node.op_type == "GroupQueryAttention" and not (llama and not attrs.get("softcap")):
            raise SystemExit(f"{node.name}: not Llama's attention (rotary halves, no softcap)")


def _take(state: dict[str, np.ndarray], weight: str, w: np.ndarray, q: int, k: int) -> None:
    """A projection's weight into ``state``, under Hugging Face's name (a packed qkv split:
    ``q`` and ``k`` rows, then v's)."""
    found = _PROJECTION.match(weight)
    assert found is not None
    layer, part, proj, lm_head = found.groups()
    if lm_head:
        state["lm_head.weight"] = w
        return
    prefix = f"model.layers.{layer}.self_attn." if part == "attn" else f"model.layers.{layer}.mlp."
    if proj == "qkv_proj":
        for name, rows in zip(("q", "k", "v"), np.split(w, [q, q + k]), strict=True):
            state[f"{prefix}{name}_proj.weight"] = rows
    else:
        state[f"{prefix}{proj}.weight"] = w


def read_decoder(folder: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(config, state)``: the ``LlamaConfig`` keyword arguments (sizes, norm epsilon, rotary
    base, tied embeddings) and the float32 weights by Hugging Face name."""
    import onnx
    from onnx import helper, numpy_helper

    genai = json.loads((folder / "genai_config.json").read_text())["model"]
    decoder = genai["decoder"]
    heads, kv_heads = decoder["num_attention_heads"], decoder["num_key_value_heads"]
    head = decoder["head_size"]
    graph = onnx.load(str(folder / decoder["filename"])).graph
    weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    nodes = list(graph.node)

    def attributes(node: Any) -> dict[str, Any]:
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    _check_ops(nodes, attributes)
    state: dict[str, np.ndarray] = {}
    eps: set[float] = set()
    read = {"cos_cache", "sin_cache"}  # the initializers taken
    for node in nodes:
        attrs = attributes(node)
        if node.op_type in ("Gather", "GatherBlockQuantized") and "input_ids" in node.input:
            state["model.embed_tokens.weight"] = _embedding(node, nodes, weights, attrs)
            feeding = [n for n in nodes if n is node or n.output[0] == node.input[0]]
            read.update(name for n in feeding for name in n.input)
        elif node.op_type in ("MatMul", "MatMulNBits") and _PROJECTION.match(node.input[1]):
            read.update(node.input[1:])
            w = _matrix(node, weights, attrs).astype(np.float32)
            _take(state, node.input[1], w, heads * head, kv_heads * head)
        elif node.op_type in ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"):
            eps.add(round(float(attrs.get("epsilon", 1e-5)), 9))
    for name, array in weights.items():
        if _NORM.match(name):
            state[name] = array.astype(np.float32)
        elif _FINAL_NORM.match(name):
            state["model.norm.weight"] = array.astype(np.float32)
        elif name not in read:
            raise SystemExit(f"{name}: a weight a Llama-shaped decoder has not")
    cos, sin = weights["cos_cache"], weights["sin_cache"]
    if cos.shape[1] * 2 != head:
        raise SystemExit(f"the rotary covers {cos.shape[1] * 2} of {head} head dimensions")
    tied = np.array_equal(state["lm_head.weight"], state["model.embed_tokens.weight"])
    config = {
        "vocab_size": genai["vocab_size"],
        "hidden_size": decoder["hidden_size"],
        "intermediate_size": state["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": decoder["num_hidden_layers"],
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head,
        "max_position_embeddings": cos.shape[0],
        "rms_norm_eps": min(eps),
        "rope_theta": rope_theta(cos, sin),
        "tie_word_embeddings": tied,
    }
    if tied:
        del state["lm_head.weight"]
    return config, state
