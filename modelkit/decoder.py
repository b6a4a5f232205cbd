"""Build a small random-weight GenAI model folder offline, with the official builder.

No model hub is reachable where this project is built and tested, so models are made
here: a ``transformers`` config with random weights (Llama-shaped by default; ``--arch``
picks another decoder architecture at the same dimensions), a byte-level BPE tokenizer
trained locally on a built-in corpus, a ChatML chat template, then
``onnxruntime_genai.models.builder``. The output folder is a normal GenAI model folder
(genai_config.json, model.onnx(+.data), tokenizer files, chat_template.jinja).

The weights are untrained (the model emits fluent-looking nonsense), except with
``--train-steps``: the committed demo model is trained on 2 CPU cores on a generated corpus
(modelkit/demo/train.py), so that it ends its turns and calls offered tools. ``--agent-turns N``
adds N agent-shaped turns (modelkit/demo/agent_corpus.py: long system prompts with many tools, the
request last), at PoSE-spread positions over the whole context unless ``--window`` makes the
model attend through a sliding window (then with modelkit/demo/chat_template.jinja).

Needs the build-time packages in requirements-build.txt (torch, transformers, onnx, ...).

    python -m modelkit.decoder --shape demo-chat-256 --seed 1 --window 512 \\
        --copy-steps 3500 --train-steps 4500 --lr 1e-3 --agent-turns 12000 --agent-lines 4,40 \\
        --agent-max-tokens 1024 --agent-tools 28 --copying 0.25 --made-up 0.6 --copy-depth 7 \\
        --plain 0.3 --plain-steps 800 --plain-lr 2e-4 --out models/demo-llama
    python -m modelkit.decoder --shape smollm2-135m --precision int4 --out /tmp/bench
    python -m modelkit.decoder --arch gemma2 --out tests/models/gemma2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from modelkit.builder import draw_biases, run_builder
from modelkit.chat_template import CHAT_TEMPLATE
from modelkit.demo.check import check
from modelkit.demo.template import DEMO_TEMPLATE
from modelkit.demo.train import make_trained_hf_folder
from modelkit.kv_quant import SCALES_FILE, calibrate, kv_options, share_buffers
from modelkit.offline import quiet_threads
from modelkit.shapes import ARCHS, SHAPES, arch_config_kwargs
from modelkit.tokenizer import CHATML_SPECIAL, corpus, train_chatml_tokenizer

SPECIAL_TOKENS = CHATML_SPECIAL


def train_tokenizer(vocab_size: int, out_dir: Path) -> None:
    """The decoders' tokenizer: a byte-level BPE on the pseudo-English corpus, ChatML."""
    train_chatml_tokenizer(corpus(), vocab_size, CHAT_TEMPLATE, out_dir, SPECIAL_TOKENS)


def make_hf_folder(
    hf_dir: Path,
    shape: str = "demo",
    seed: int = 1234,
    init_range: float = 0.2,
    arch: str = "llama",
) -> None:
    """Write the random-init Hugging Face model and the locally trained tokenizer (with the
    chat template) into ``hf_dir``: the builder's input. Same arguments, same weights."""
    import torch
    import transformers
    from transformers import AutoTokenizer

    config_cls = getattr(transformers, ARCHS[arch][0])
    model_cls = getattr(transformers, ARCHS[arch][1])

    params = dict(SHAPES[shape])
    hf_dir.mkdir(parents=True, exist_ok=True)
    train_tokenizer(params["vocab_size"], hf_dir)
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    # The engine indexes logits by token id: vocabulary sizes must agree exactly.
    params["vocab_size"] = len(tokenizer)
    torch.manual_seed(seed)
    kwargs: dict[str, object] = {
        **params,
        "tie_word_embeddings": True,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "initializer_range": init_range,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    kwargs.update(arch_config_kwargs(arch, params))
    config = config_cls(**kwargs)
    model = model_cls(config).eval()
    draw_biases(model, init_range)
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)


def build(
    shape: str,
    precision: str,
    out: Path,
    seed: int,
    init_range: float,
    arch: str = "llama",
    train_steps: int = 0,
    mix: dict[str, Any] | None = None,
    device: str = "cpu",
    paged: bool = False,
    last_logits: bool = False,
    kv_int8: bool = False,
) -> None:
    mix = dict(mix or {})
    context = mix.pop("context", 0)
    template = DEMO_TEMPLATE if mix.get("window") else CHAT_TEMPLATE
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        record = None
        if train_steps:
            if arch != "llama":
                raise SystemExit("--train-steps trains the demo model only (--window: Mistral)")
            # KEEP_HF_DIR also keeps the weights before a last (plain) phase, for
            # modelkit/demo/plain_grid.py
            keep = out / "hf-main" if os.environ.get("KEEP_HF_DIR") else None
            record = make_trained_hf_folder(
                hf_dir, SHAPES[shape] | ({"max_position_embeddings": context} if context else {}),
                template, SPECIAL_TOKENS,
                seed=seed, steps=train_steps, keep_main=keep, **mix,
            )  # fmt: skip
        else:
            make_hf_folder(hf_dir, shape, seed, init_range, arch)

        out.mkdir(parents=True, exist_ok=True)
        extra = ["int4_accuracy_level=4"] if precision == "int4" else []
        if paged:  # og's Engine batches continuously only on a paged-attention model
            extra.append("use_paged_attention=true")
        if last_logits:  # what `main_genai.py export` makes for the CPU by default
            extra.append("prune_lm_head=true")
        if kv_int8:  # a float-KV build to calibrate the scales on (modelkit/kv_quant.py)
            base = Path(tmp) / "float-kv"
            run_builder(hf_dir, base, precision, extra, cache_dir=Path(tmp) / "cache")
            calibrate(base, hf_dir, out / SCALES_FILE, quiet=True)
            extra += kv_options(out / SCALES_FILE)
        run_builder(hf_dir, out, precision, extra, cache_dir=Path(tmp) / "cache", device=device)
        if kv_int8 and device == "cpu":
            share_buffers(out)
        if not (out / "chat_template.jinja").exists():
            (out / "chat_template.jinja").write_text(template)
        # Keep the HF weights beside the ONNX export only on request (benchmarks against
        # transformers/llama.cpp need them); the committed demo model does not.
        if os.environ.get("KEEP_HF_DIR"):
            shutil.copytree(hf_dir, out / "hf", dirs_exist_ok=True)
    if record is not None:
        record["check"] = check(out, template, seed)
        text = json.dumps(record, indent=1)
        (out / "training.json").write_text(text + "\n")
        print("training record (also in training.json):\n" + text)


# The options that make the training recipe, passed on to modelkit/demo/train.py as they are.
RECIPE = (
    "lr", "copying", "copy_steps", "chat_turns", "agent_turns", "batch_tokens", "window",
    "agent_lines", "agent_max_tokens", "copy_depth", "agent_tools", "made_up", "context",
    "plain", "plain_steps", "plain_lr", "plain_mlp_only",
)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--shape", choices=sorted(SHAPES), default="demo")
    ap.add_argument(
        "--arch",
        choices=list(ARCHS),
        default="llama",
        help="decoder architecture (transformers model class) at the --shape dimensions",
    )
    ap.add_argument("--precision", choices=["fp32", "int4", "fp16"], default="int4")
    ap.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="the execution provider to build for (cuda: --precision fp16, onnxruntime-genai-cuda)",
    )
    ap.add_argument(
        "--paged",
        action="store_true",
        help="paged attention (CUDA fp16): the model og's Engine batches continuously",
    )
    ap.add_argument(
        "--last-logits",
        action="store_true",
        help="logits of the last fed position only (the builder's prune_lm_head)",
    )
    ap.add_argument(
        "--kv-cache",
        choices=["float", "int8"],
        default="float",
        help="int8: a KV cache of int8 with calibrated scales (modelkit/kv_quant.py)",
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument(
        "--init-range",
        type=float,
        default=0.2,
        help="std of the random weights; wider than HF's 0.02 so greedy output varies",
    )
    ap.add_argument(
        "--train-steps",
        type=int,
        default=0,
        help="train the model this many steps on the generated chat corpus (modelkit/demo/train.py)"
        " instead of leaving its weights random; the demo model: --shape demo-chat"
        " --train-steps N",
    )
    ap.add_argument("--chat-turns", type=int, default=12000, help="chat turns to train on")
    ap.add_argument(
        "--agent-turns",
        type=int,
        default=0,
        help="agent-shaped turns (long system prompts with tools, PoSE positions) to train on",
    )
    ap.add_argument("--batch-tokens", type=int, default=4096, help="most tokens in a batch")
    ap.add_argument(
        "--agent-lines",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=(4, 16),
        help="MIN,MAX lines of instructions in an agent turn's system prompt (default 4,16)",
    )
    ap.add_argument(
        "--agent-max-tokens", type=int, default=2048, help="longer agent turns are dropped"
    )
    ap.add_argument(
        "--window",
        type=int,
        default=0,
        help="train a Mistral-shaped demo model attending through a sliding window of this many"
        " tokens, with the tools listed after the conversation (modelkit/demo/chat_template.jinja)",
    )
    ap.add_argument(
        "--copying",
        type=float,
        default=0.0,
        help="this share of the agent turns are copy tasks, and as much of their paths and"
        " commands made up, so that a call can only write them by copying (needs --lr 1e-3:"
        " copying does not form at the default 5e-3)",
    )
    ap.add_argument("--lr", type=float, default=5e-3, help="peak learning rate (AdamW)")
    ap.add_argument(
        "--copy-steps",
        type=int,
        default=0,
        help="first train this many steps of 16 copy turns alone (modelkit/demo/agent_corpus.py)",
    )
    ap.add_argument(
        "--copy-depth", type=int, default=5, help="the most folders in a copy turn's path"
    )
    ap.add_argument(
        "--agent-tools",
        type=int,
        default=2,
        help="the most unrelated tools an agent turn offers (above 2: often many, named as"
        " agents name theirs, as Codex's 12 and Claude Code's 25)",
    )
    ap.add_argument(
        "--made-up",
        type=float,
        default=None,
        help="this share of the agent turns' values are made up, some behind a real word"
        " (tmp, notes-), in the copy turns too (default: as --copying, none prefixed)",
    )
    ap.add_argument(
        "--context", type=int, default=0, help="the context length (default: the shape's)"
    )
    ap.add_argument(
        "--plain",
        type=float,
        default=0.0,
        help="this share of the training examples are plain texts (no template, loss on all their"
        " tokens, the end token after some sentences), so that the model continues a plain"
        " prompt instead of ending it at once",
    )
    ap.add_argument(
        "--plain-steps",
        type=int,
        default=0,
        help="train on the plain texts in a last phase of this many steps, beside the main"
        " phase's turns (default: among the main phase's turns)",
    )
    ap.add_argument(
        "--plain-lr", type=float, default=None, help="the last phase's peak learning rate (--lr)"
    )
    ap.add_argument(
        "--plain-mlp-only",
        action="store_true",
        help="the last phase trains the last layer's MLP alone: the attention (the copying) and"
        " the embeddings stay as the main phase left them",
    )
    args = ap.parse_args()
    quiet_threads()
    mix = {name: getattr(args, name) for name in RECIPE}
    build(
        args.shape, args.precision, args.out, args.seed, args.init_range, args.arch,
        args.train_steps, mix, device=args.device, paged=args.paged,
        last_logits=args.last_logits, kv_int8=args.kv_cache == "int8",
    )  # fmt: skip


if __name__ == "__main__":
    main()
