"""An fp32 copy of an int4 CPU model folder: every ``MatMulNBits`` becomes a plain ``MatMul``
over its weights dequantized, and a ``GatherBlockQuantized`` embedding a plain ``Gather``.

What it is for: the committed demo model is trained (it copies paths and commands from its
context) but int4, and int4 kernels give a multi-token run other logits than one-token steps.
Its fp32 copy copies just the same and runs on fp32 kernels, so tests can prove that n-gram
speculation changes no output (tests/models/demo-fp32). ``--context`` trims the rotary
caches and the context length, which keeps the folder small.

    python -m modelkit.dequantize models/demo-llama tests/models/demo-fp32 --context 4096

Needs ``onnx`` (requirements-build.txt).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def unpack(packed: np.ndarray, bits: int) -> np.ndarray:
    """uint8 bytes to their 4-bit values, low nibble first: ``[..., n] -> [..., 2n]``."""
    if bits != 4:
        raise SystemExit(f"only 4-bit weights are supported, not {bits}")
    low, high = packed & 0x0F, packed >> 4
    return np.stack([low, high], axis=-1).reshape(*packed.shape[:-1], -1).astype(np.float32)


def dequantize_rows(values: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    """``values [rows, cols]`` (unsigned 4-bit, zero point 8) times each block's scale."""
    rows, cols = values.shape
    blocks = scales.reshape(rows, -1)
    scaled = (values - 8.0).reshape(rows, -1, block) * blocks[:, :, None]
    out: np.ndarray = scaled.reshape(rows, cols)
    return out


def nbits_matrix(node: Any, weights: dict[str, np.ndarray], attrs: dict[str, Any]) -> np.ndarray:
    """A ``MatMulNBits`` node's weight, dequantized: ``[N, K]`` (the product is ``A @ W^T``)."""
    if len(node.input) > 3 and node.input[3]:
        raise SystemExit(f"{node.name}: zero points are not supported")
    k, n = attrs["K"], attrs["N"]
    values = unpack(weights[node.input[1]], attrs["bits"]).reshape(n, -1)[:, :k]
    return dequantize_rows(values, weights[node.input[2]], attrs["block_size"])


def quantized_table(
    node: Any, nodes: list[Any], weights: dict[str, np.ndarray], attrs: dict[str, Any]
) -> np.ndarray:
    """A ``GatherBlockQuantized`` node's table, dequantized: ``[rows, cols]`` (its data an
    initializer, or a ``Reshape`` of one: the tied lm_head's)."""
    data = node.input[0]
    source = next((s for s in nodes if data in s.output), None)
    packed = weights[source.input[0]] if source is not None else weights[data]
    rows = packed.shape[0]
    values = unpack(packed.reshape(rows, -1), attrs["bits"])
    return dequantize_rows(values, weights[node.input[2]], attrs["block_size"])


def dequantize(src: Path, out: Path, context: int | None = None) -> None:
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src / "model.onnx"))
    graph = model.graph
    weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    made: dict[str, np.ndarray] = {}
    nodes = []
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "MatMulNBits":
            w = nbits_matrix(node, weights, attrs)
            name = node.input[1] + "_fp32"
            made[name] = np.ascontiguousarray(w.T)  # [K, N]: A @ W^T
            nodes.append(helper.make_node("MatMul", [node.input[0], name], list(node.output)))
        elif node.op_type == "GatherBlockQuantized":
            table = quantized_table(node, list(graph.node), weights, attrs)
            name = node.name.strip("/").replace("/", "_") + "_fp32"
            made[name] = table
            nodes.append(helper.make_node("Gather", [name, node.input[1]], list(node.output)))
        else:
            nodes.append(node)
    nodes = _live(nodes, [o.name for o in graph.output])
    used = {i for node in nodes for i in node.input}
    keep = [t for t in graph.initializer if t.name in used]
    if context is not None:
        for tensor in keep:
            if tensor.name in ("cos_cache", "sin_cache"):
                trimmed = weights[tensor.name][:context]
                tensor.CopyFrom(numpy_helper.from_array(trimmed, tensor.name))
    keep += [numpy_helper.from_array(array, name) for name, array in made.items()]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    del graph.node[:]
    graph.node.extend(nodes)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.onnx.data").unlink(missing_ok=True)  # onnx appends to what is there
    onnx.save(
        model,
        str(out / "model.onnx"),
        save_as_external_data=True,
        location="model.onnx.data",
        size_threshold=1024,
    )
    (out / "model.onnx.data").chmod(0o644)  # onnx writes it for its owner only
    for file in _FILES:
        if (src / file).exists():
            shutil.copy(src / file, out / file)
    config: dict[str, Any] = json.loads((src / "genai_config.json").read_text())
    if context is not None:
        config["model"]["context_length"] = context
        config["search"]["max_length"] = context
    (out / "genai_config.json").write_text(json.dumps(config, indent=4) + "\n")


def _live(nodes: list[Any], outputs: list[str]) -> list[Any]:
    """The nodes some graph output depends on, in their order (drops the int4 Reshape)."""
    needed, live = set(outputs), []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            live.append(node)
            needed.update(node.input)
    return live[::-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--context", type=int, help="trim the context (and rotary caches) to this")
    args = ap.parse_args()
    dequantize(args.src, args.out, args.context)


if __name__ == "__main__":
    main()
