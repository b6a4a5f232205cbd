"""Build the demo model with switchable LoRA adapters, offline: tests/models/demo-lora.

The base is the demo model of ``modelkit.decoder`` (``--shape demo``, Llama, seed 1234,
int4), exported by the official builder with a PEFT LoRA (rank 4 on every linear layer of
every decoder layer) whose B matrices are zero, so that without an adapter it computes exactly
what the plain demo model computes. The LoRA MatMuls stay fp32 (``nodes_to_exclude``): int4
would pack them into MatMulNBits blocks, which an adapter cannot override. Their weights,
initializers named ``model.layers.N.{attn,mlp}.<proj>.lora_{A,B}.MatMul.weight``, are then
declared graph inputs as well: overridable, with the zero-B values as defaults.

Each named adapter is a PEFT LoRA of the same shape with non-zero random A and B, exported by
the same builder (``adapter_path=``, which bakes B x alpha/r into the graph); its LoRA
initializers, taken by name from that export, are written as ``<name>.onnx_adapter`` with
``onnxruntime.AdapterFormat``. onnxruntime-genai applies one per generator:

    model = og.Model(folder)
    adapters = og.Adapters(model)
    adapters.load(f"{folder}/pirate.onnx_adapter", "pirate")
    generator = og.Generator(model, params)
    generator.set_active_adapter(adapters, "pirate")  # before append_tokens

The script checks with og that the base equals the plain export and that each adapter equals
its baked-in export, greedy, token for token, and records those outputs in expected.json.

Needs the build-time packages (requirements-build.txt, peft included):

    python -m modelkit.adapter --out tests/models/demo-lora
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from modelkit.builder import run_builder
from modelkit.chat_template import CHAT_TEMPLATE
from modelkit.decoder import make_hf_folder
from modelkit.expected import write_expected
from modelkit.shapes import SHAPES

# name -> seed of its random LoRA weights.
ADAPTERS = {"pirate": 1, "poet": 2}
RANK = 4
ALPHA = 8  # PEFT scaling alpha / rank = 2, which the builder folds into B
LORA_STD = 0.2  # like the base weights' 0.2: the adapters change greedy output at once
# Hugging Face module -> the builder's node path (per decoder layer).
TARGETS = {
    "q_proj": "attn",
    "k_proj": "attn",
    "v_proj": "attn",
    "o_proj": "attn",
    "gate_proj": "mlp",
    "up_proj": "mlp",
    "down_proj": "mlp",
}
PROMPTS = [
    "The river runs to the city and the",
    "hello world, the model server answers the question of the",
    "1 + 2 = 3",
]
NEW_TOKENS = 16
MAX_LENGTH = 256


def lora_nodes(layers: int) -> list[str]:
    """The builder's LoRA MatMul node names, kept out of int4 quantization."""
    return [
        f"/model/layers.{i}/{block}/{proj}/lora_{ab}/MatMul"
        for i in range(layers)
        for proj, block in TARGETS.items()
        for ab in "AB"
    ]


def lora_weight(node: str) -> str:
    """The initializer that holds a LoRA MatMul's weight (the builder's naming)."""
    return node[1:].replace("/", ".") + ".weight"


def save_lora(hf_dir: Path, out: Path, seed: int | None) -> None:
    """A PEFT LoRA on the weights in ``hf_dir``: random non-zero A and B from ``seed``, or,
    with ``seed=None``, PEFT's own initialization (B = 0, the identity adapter)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(hf_dir)
    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=list(TARGETS), lora_dropout=0.0)
    model = get_peft_model(base, config)
    if seed is not None:
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if ".lora_A." in name or ".lora_B." in name:
                    param.copy_(torch.randn(param.shape, generator=gen) * LORA_STD)
    model.save_pretrained(out)


def export(hf_dir: Path, out: Path, adapter: Path | None, nodes: list[str], cache: Path) -> None:
    """The official builder, int4 as the demo model, LoRA MatMuls (if any) left fp32."""
    extra = ["int4_accuracy_level=4"]
    if adapter is not None:
        extra += [f"adapter_path={adapter}", "nodes_to_exclude=" + ",".join(nodes)]
    run_builder(hf_dir, out, "int4", extra, cache_dir=cache, quiet=True)
    if not (out / "chat_template.jinja").exists():
        (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)


def lora_initializers(folder: Path, names: list[str]) -> dict[str, Any]:
    """The LoRA weights of an export, by name, as fp32 numpy arrays."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(folder / "model.onnx"))
    found = {
        init.name: np.ascontiguousarray(numpy_helper.to_array(init), dtype=np.float32)
        for init in model.graph.initializer
        if init.name in names
    }
    missing = sorted(set(names) - set(found))
    if missing:
        raise SystemExit(f"{folder}: LoRA weights missing (quantized or renamed?): {missing}")
    return found


def make_overridable(model_path: Path, names: list[str]) -> None:
    """Declare the named initializers graph inputs too: the initializer stays as the input's
    default, and a LoRA adapter (onnxruntime's run options) overrides it by name. Only the
    graph file changes; the external data file is untouched."""
    import onnx
    from onnx import helper

    model = onnx.load(str(model_path), load_external_data=False)
    inits = {init.name: init for init in model.graph.initializer}
    for name in names:
        init = inits[name]
        info = helper.make_tensor_value_info(name, init.data_type, list(init.dims))
        model.graph.input.append(info)
    onnx.save_model(model, str(model_path))


def write_adapter(params: dict[str, Any], path: Path) -> None:
    import onnxruntime as ort

    fmt = ort.AdapterFormat()
    fmt.set_adapter_version(1)
    fmt.set_model_version(1)
    fmt.set_parameters({k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in params.items()})
    fmt.export_adapter(str(path))


def og_greedy(folder: Path, adapter: str | None = None) -> list[list[int]]:
    """Greedy token ids of a plain og.Generator loop on each prompt, optionally with one of
    the folder's ``<adapter>.onnx_adapter`` files active."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    adapters = None
    if adapter is not None:
        adapters = og.Adapters(model)
        adapters.load(str(folder / f"{adapter}.onnx_adapter"), adapter)
    outputs = []
    for prompt in PROMPTS:
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=MAX_LENGTH, do_sample=False)
        gen = og.Generator(model, params)
        if adapter is not None:
            gen.set_active_adapter(adapters, adapter)
        gen.append_tokens(tokenizer.encode(prompt))
        out: list[int] = []
        while len(out) < NEW_TOKENS and not gen.is_done():
            gen.generate_next_token()
            out.append(int(gen.get_next_tokens()[0]))
        outputs.append(out)
    return outputs


def build(out: Path, seed: int, init_range: float) -> None:
    layers = SHAPES["demo"]["num_hidden_layers"]
    nodes = lora_nodes(layers)
    names = [lora_weight(n) for n in nodes]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        hf_dir = tmp / "hf"
        make_hf_folder(hf_dir, "demo", seed, init_range, "llama")
        cache = tmp / "cache"

        print("exporting: plain, base (zero B), " + ", ".join(ADAPTERS), flush=True)
        export(hf_dir, tmp / "plain", None, nodes, cache)
        save_lora(hf_dir, tmp / "lora-base", None)
        export(hf_dir, tmp / "base", tmp / "lora-base", nodes, cache)
        for name, adapter_seed in ADAPTERS.items():
            save_lora(hf_dir, tmp / f"lora-{name}", adapter_seed)
            export(hf_dir, tmp / name, tmp / f"lora-{name}", nodes, cache)

        zero = lora_initializers(tmp / "base", names)
        if any(v.any() for k, v in zero.items() if ".lora_B." in k):
            raise SystemExit("the base export's LoRA B weights are not all zero")
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(tmp / "base", out)
        make_overridable(out / "model.onnx", names)
        for name in ADAPTERS:
            params = lora_initializers(tmp / name, names)
            if not any(v.any() for k, v in params.items() if ".lora_B." in k):
                raise SystemExit(f"adapter {name}: its LoRA B weights are all zero")
            write_adapter(params, out / f"{name}.onnx_adapter")

        # The proof: og on the new folder against the builder's own exports.
        expected: dict[str, Any] = {
            "how": (
                f"og.Generator greedy, max_length {MAX_LENGTH}; base = the plain int4 export "
                "of the same weights (= models/demo-llama), each adapter = the builder's export "
                "with that LoRA baked in"
            ),
            "max_new_tokens": NEW_TOKENS,
            "prompts": PROMPTS,
            "base": og_greedy(tmp / "plain"),
        }
        if og_greedy(out) != expected["base"]:
            raise SystemExit("without an adapter the folder differs from the plain export")
        for name in ADAPTERS:
            expected[name] = og_greedy(tmp / name)
            if og_greedy(out, name) != expected[name]:
                raise SystemExit(f"adapter {name} differs from the export with it baked in")
            if expected[name] == expected["base"]:
                raise SystemExit(f"adapter {name} does not change the greedy output")
    write_expected(out, expected)
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {out} ({size / 1024:.0f} KiB) in {time.monotonic() - started:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1234, help="the base model's seed")
    ap.add_argument("--init-range", type=float, default=0.2, help="std of the base weights")
    args = ap.parse_args()
    build(args.out, args.seed, args.init_range)


if __name__ == "__main__":
    main()
