"""Build a small Optimum-style ONNX model folder offline: no genai_config.json, the layout of
community exports (onnx-community/*-ONNX, transformers.js): the Hugging Face files at the top
(config.json, generation_config.json, tokenizer files, here also the weights) and the ONNX
decoder with past key values under onnx/.

The model is a random-weight Llama with a locally trained tokenizer (as modelkit/decoder.py
makes them, smaller), exported by Optimum (``optimum-onnx``, task text-generation-with-past).
The greedy ``generate()`` output of the Hugging Face weights on a few prompts is recorded in
expected.json: the server must reproduce it token for token from the ONNX export.

Optimum-onnx pins an older transformers than requirements-build.txt, so use a separate venv:

    python -m venv /tmp/optimum-venv
    /tmp/optimum-venv/bin/pip install torch==2.13.0 optimum-onnx tokenizers
    /tmp/optimum-venv/bin/python -m modelkit.optimum_model --out tests/hub_models/optimum-llama
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from modelkit import cli
from modelkit.decoder import train_tokenizer
from modelkit.expected import compare, read_expected, report, write_expected
from modelkit.offline import go_offline

# Small enough to commit (the ONNX file and the weights together stay well under 1 MB), with
# fewer KV heads than attention heads so that inferring one from the other would be wrong.
# Head size 16: the builder's GroupQueryAttention (an export of these weights by
# `main_genai.py export`) needs a multiple of 16.
SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 1024,
    "max_position_embeddings": 2048,
}

# Text prompts (for /v1/completions) and one chat (for /v1/chat/completions).
PROMPTS = [
    "The river runs to the city",
    "hello world, the model server answers the question of the",
    "1 + 2 = 3",
]
CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me about the moon and the stars."},
]
NEW_TOKENS = 24

# Files of the Hugging Face folder kept at the top of the output folder.
HF_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "model.safetensors",
)


def greedy(model: Any, tokenizer: Any, text: str, new_tokens: int) -> dict[str, Any]:
    """Hugging Face generate(), greedy: the oracle the server is compared with."""
    import torch

    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )
    generated = [int(t) for t in out[0, ids.shape[1] :]]
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    finished = bool(generated) and generated[-1] in eos_ids
    if finished:
        generated = generated[:-1]
    return {
        "prompt": text,
        "prompt_ids": [int(t) for t in ids[0]],
        "generated_ids": generated,
        "text": tokenizer.decode(generated, skip_special_tokens=True),
        "finish_reason": "stop" if finished else "length",
    }


def expected_outputs(folder: Path, new_tokens: int = NEW_TOKENS) -> dict[str, Any]:
    """Greedy generate() of the weights in ``folder`` on the fixed prompts."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    chat_text = tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    return {
        "oracle": f"transformers {transformers.__version__} generate(), greedy, fp32",
        "max_new_tokens": new_tokens,
        "completions": [greedy(model, tokenizer, p, new_tokens) for p in PROMPTS],
        "chat": {"messages": CHAT, **greedy(model, tokenizer, chat_text, new_tokens)},
    }


def build(out: Path, seed: int, init_range: float) -> None:
    import torch
    from optimum.exporters.onnx import main_export
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    params = dict(SHAPE)
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        hf_dir.mkdir()
        train_tokenizer(params["vocab_size"], hf_dir)
        tokenizer = AutoTokenizer.from_pretrained(hf_dir)
        params["vocab_size"] = len(tokenizer)
        torch.manual_seed(seed)
        config = LlamaConfig(
            **params,
            tie_word_embeddings=True,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            initializer_range=init_range,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        LlamaForCausalLM(config).eval().save_pretrained(hf_dir)
        tokenizer.save_pretrained(hf_dir)

        export_dir = Path(tmp) / "onnx"
        go_offline()
        main_export(
            str(hf_dir),
            output=export_dir,
            task="text-generation-with-past",
            local_files_only=True,
        )
        if out.exists():
            shutil.rmtree(out)
        (out / "onnx").mkdir(parents=True)
        for name in HF_FILES:
            if (hf_dir / name).is_file():
                shutil.copy2(hf_dir / name, out / name)
        for path in export_dir.iterdir():
            if path.name.startswith("model.onnx"):  # the graph and any external data
                shutil.copy2(path, out / "onnx" / path.name)
    write_expected(out, expected_outputs(out))
    print(f"wrote {out}")


def check(out: Path) -> int:
    """The greedy outputs re-derived from the weights in ``out`` (all but the oracle's name)."""
    recorded = read_expected(out)
    derived = expected_outputs(out, recorded["max_new_tokens"])
    keys = [k for k in recorded if k != "oracle"]
    return report(compare(recorded, derived, keys=keys))


def main() -> None:
    ap = cli.parser(__doc__, "only re-derive expected.json from the weights in --out and compare")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init-range", type=float, default=0.2, help="std of the random weights")
    args = ap.parse_args()
    cli.build_or_check(args, lambda: build(args.out, args.seed, args.init_range), check)


if __name__ == "__main__":
    main()
