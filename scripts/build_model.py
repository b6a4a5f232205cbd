"""Build a small random-weight GenAI model folder offline, with the official builder.

No model hub is reachable where this project is built and tested, so models are made
here: a Llama-shaped ``transformers`` config with random weights, a byte-level BPE
tokenizer trained locally on a built-in corpus, a ChatML chat template, then
``onnxruntime_genai.models.builder``. The output folder is a normal GenAI model folder
(genai_config.json, model.onnx(+.data), tokenizer files, chat_template.jinja).

The weights are untrained: the model emits fluent-looking nonsense. It exists to exercise
the real engine (ONNX graph, tokenizer, KV cache) and to measure speed.

Needs the build-time packages in requirements-build.txt (torch, transformers, onnx, ...).

    python scripts/build_model.py --shape demo --out models/demo-llama
    python scripts/build_model.py --shape smollm2-135m --precision int4 --out /tmp/bench
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Llama-shaped configs. "demo" is small enough to commit (< 1 MB); the other two match
# public models' shapes for realistic speed measurements.
SHAPES: dict[str, dict[str, int]] = {
    "demo": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 2048,
    },
    "smollm2-135m": {
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
    },
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 49152,
        "max_position_embeddings": 8192,
    },
}

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_WORDS = (
    "the a an of to in and is it that for on with as was by at from this be are or have not "
    "model server token request stream answer question cache prompt reply chat user system "
    "assistant hello world time fast slow small large onnx runtime engine thread queue batch "
    "latency throughput first last next word line text code python data value number one two "
    "three four five six seven eight nine ten hundred thousand good bad new old red blue green "
    "sun moon star river mountain city house road tree bird fish water fire earth wind light "
    "dark day night morning evening summer winter spring autumn music book story paper write "
    "read speak listen think know learn teach build run walk open close start stop begin end"
).split()


def corpus(lines: int = 4000, seed: int = 0) -> list[str]:
    """A deterministic pseudo-English corpus: enough to train a byte-level BPE."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        n = rng.randint(4, 16)
        sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
        out.append(sentence.capitalize() + rng.choice([".", "?", "!", ",", ":"]))
    out += [f"{i} + {i + 1} = {2 * i + 1}" for i in range(200)]
    return out


def train_tokenizer(vocab_size: int, out_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
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


def run_builder(
    hf_dir: Path,
    out: Path,
    precision: str,
    extra_options: list[str],
    *,
    cache_dir: Path,
    quiet: bool = False,
) -> None:
    """The official onnxruntime-genai builder on a local HF folder, offline, CPU target."""
    cmd = [
        sys.executable, "-m", "onnxruntime_genai.models.builder",
        "-i", str(hf_dir), "-o", str(out), "-p", precision, "-e", "cpu", "-c", str(cache_dir),
        "--extra_options", "hf_token=false", *extra_options,
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL if quiet else None)


def build(shape: str, precision: str, out: Path, seed: int, init_range: float) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    params = dict(SHAPES[shape])
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        hf_dir.mkdir()
        train_tokenizer(params["vocab_size"], hf_dir)
        tokenizer = AutoTokenizer.from_pretrained(hf_dir)
        # The engine indexes logits by token id: vocabulary sizes must agree exactly.
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

        out.mkdir(parents=True, exist_ok=True)
        extra = ["int4_accuracy_level=4"] if precision == "int4" else []
        run_builder(hf_dir, out, precision, extra, cache_dir=Path(tmp) / "cache")
        if not (out / "chat_template.jinja").exists():
            (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
        # Keep the HF weights beside the ONNX export only on request (benchmarks against
        # transformers/llama.cpp need them); the committed demo model does not.
        if os.environ.get("KEEP_HF_DIR"):
            shutil.copytree(hf_dir, out / "hf", dirs_exist_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--shape", choices=sorted(SHAPES), default="demo")
    ap.add_argument("--precision", choices=["fp32", "int4"], default="int4")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument(
        "--init-range",
        type=float,
        default=0.2,
        help="std of the random weights; wider than HF's 0.02 so greedy output varies",
    )
    args = ap.parse_args()
    build(args.shape, args.precision, args.out, args.seed, args.init_range)


if __name__ == "__main__":
    main()
