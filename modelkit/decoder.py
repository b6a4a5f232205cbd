"""Build a small random-weight GenAI model folder offline, with the official builder.

No model hub is reachable where this project is built and tested, so models are made
here: a ``transformers`` config with random weights (Llama-shaped by default; ``--arch``
picks another decoder architecture at the same dimensions), a byte-level BPE tokenizer
trained locally on a built-in corpus, a ChatML chat template, then
``onnxruntime_genai.models.builder``. The output folder is a normal GenAI model folder
(genai_config.json, model.onnx(+.data), tokenizer files, chat_template.jinja).

The weights are untrained (the model emits fluent-looking nonsense), except with
``--train-steps``: the committed demo model is trained on 2 CPU cores on a generated corpus
(scripts/train_demo.py), so that it ends its turns and calls offered tools. ``--agent-turns N``
adds N agent-shaped turns (scripts/agent_corpus.py: long system prompts with many tools, the
request last), at PoSE-spread positions over the whole context unless ``--window`` makes the
model attend through a sliding window (then with scripts/demo_chat_template.jinja).

Needs the build-time packages in requirements-build.txt (torch, transformers, onnx, ...).

    python scripts/build_model.py --shape demo-chat-256 --seed 1 --window 512 \\
        --copy-steps 3500 --train-steps 4500 --lr 1e-3 --agent-turns 12000 --agent-lines 4,40 \\
        --agent-max-tokens 1024 --agent-tools 28 --copying 0.25 --made-up 0.6 --copy-depth 7 \\
        --plain 0.3 --plain-steps 800 --plain-lr 2e-4 --out models/demo-llama
    python scripts/build_model.py --shape smollm2-135m --precision int4 --out /tmp/bench
    python scripts/build_model.py --arch gemma2 --out tests/models/gemma2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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
    # The demo model before the current one (128 wide, full attention, 1,000 steps), and the
    # base of the window experiments in docs/models.md; a 64k context, 1 KiB of KV a token.
    "demo-chat": {
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 65536,
    },
    # The committed demo model (models/demo-llama), with --window 512 and its recipe in
    # docs/models.md: twice as wide (1.4M parameters, the same 1 KiB of KV cache a token).
    "demo-chat-256": {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 65536,
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

# Decoder architectures: (transformers config class, model class, extra config kwargs).
# The dimensions come from SHAPES; these kwargs only add what the architecture needs on top.
# "llama" is the historical default and gets no extras (its build is unchanged).
_WINDOW = 64  # small, so a short test prompt already runs past the sliding window
ARCHS: dict[str, tuple[str, str, dict[str, object]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"use_sliding_window": False}),
    # Qwen3's default head_dim is 128, not hidden/heads; it adds q/k RMSNorm.
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"use_sliding_window": False, "head_dim": None}),
    # Phi-3 fuses qkv/gate-up projections; max == original max positions selects the plain
    # (not LongRoPE) Phi-3 builder.
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"original_max_position_embeddings": None}),
    # Mistral slides its window over every layer, but transformers' MistralConfig has no
    # `layer_types`, and without them the builder treats every layer as full attention and
    # drops the window from the export: name every layer a sliding one explicitly.
    "mistral": (
        "MistralConfig",
        "MistralForCausalLM",
        {"head_dim": None, "sliding_window": _WINDOW, "layer_types": "sliding"},
    ),
    # Gemma scales the input embedding by sqrt(hidden_size): with random weights and a tied
    # lm_head the residual stream is dominated by the current token's own embedding and
    # greedy decoding echoes the last prompt token forever. Untied, the output varies.
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": None, "tie_word_embeddings": False}),
    # Gemma-2: alternating sliding/full layers, attention and final logit soft-capping.
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {
            "head_dim": None,
            "tie_word_embeddings": False,
            "query_pre_attn_scalar": None,
            "sliding_window": _WINDOW,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
        },
    ),
}


def arch_config_kwargs(arch: str, params: dict[str, int]) -> dict[str, object]:
    """Config kwargs specific to ``arch``, with placeholders (None) resolved from ``params``."""
    head_dim = params["hidden_size"] // params["num_attention_heads"]
    out: dict[str, object] = {}
    for key, value in ARCHS[arch][2].items():
        if key in ("head_dim", "query_pre_attn_scalar") and value is None:
            value = head_dim
        elif key == "original_max_position_embeddings" and value is None:
            value = params["max_position_embeddings"]
        elif key == "layer_types" and value == "sliding":
            value = ["sliding_attention"] * params["num_hidden_layers"]
        out[key] = value
    return out


SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML with Qwen2.5's tool calling (<tool_call> JSON), so the tiny models can be given
# tools; without tools it renders exactly the plain ChatML turns.
CHAT_TEMPLATE = (Path(__file__).resolve().parent / "chat_template.jinja").read_text()
# The demo model's (--window): the tools listed after the conversation, within its window.
DEMO_TEMPLATE = (Path(__file__).resolve().parent / "demo" / "chat_template.jinja").read_text()

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
    device: str = "cpu",
) -> None:
    """The official onnxruntime-genai builder on a local HF folder, offline, for ``device``'s
    execution provider (a CUDA build needs onnxruntime-genai-cuda and a GPU)."""
    cmd = [
        sys.executable, "-m", "onnxruntime_genai.models.builder",
        "-i", str(hf_dir), "-o", str(out), "-p", precision, "-e", device, "-c", str(cache_dir),
        "--extra_options", "hf_token=false", *extra_options,
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL if quiet else None)


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
    # transformers initializes biases to zero, and the builder leaves all-zero biases out
    # of the export: draw them like the weights so that the graph keeps its bias Add
    # (Qwen2's q/k/v). Architectures without biases (Llama) are unchanged.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, init_range)
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
) -> None:
    mix = dict(mix or {})
    context = mix.pop("context", 0)
    template = DEMO_TEMPLATE if mix.get("window") else CHAT_TEMPLATE
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        record = None
        if train_steps:
            from modelkit.demo.train import make_trained_hf_folder

            if arch != "llama":
                raise SystemExit("--train-steps trains the demo model only (--window: Mistral)")
            # KEEP_HF_DIR also keeps the weights before a last (plain) phase, for
            # scripts/plain_grid.py
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
        run_builder(hf_dir, out, precision, extra, cache_dir=Path(tmp) / "cache", device=device)
        if not (out / "chat_template.jinja").exists():
            (out / "chat_template.jinja").write_text(template)
        # Keep the HF weights beside the ONNX export only on request (benchmarks against
        # transformers/llama.cpp need them); the committed demo model does not.
        if os.environ.get("KEEP_HF_DIR"):
            shutil.copytree(hf_dir, out / "hf", dirs_exist_ok=True)
    if record is not None:
        from modelkit.demo.check import check

        record["check"] = check(out, template, seed)
        text = json.dumps(record, indent=1)
        (out / "training.json").write_text(text + "\n")
        print("training record (also in training.json):\n" + text)


# The options that make the training recipe, passed on to scripts/train_demo.py as they are.
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
        help="train the model this many steps on the generated chat corpus (scripts/train_demo.py)"
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
        " tokens, with the tools listed after the conversation (scripts/demo_chat_template.jinja)",
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
        help="first train this many steps of 16 copy turns alone (scripts/agent_corpus.py)",
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
    # On a shared machine, torch's OpenMP threads spinning at each op's barrier wait for a
    # partner the scheduler has put aside; sleeping waits give the same numbers, and were ten
    # times faster under other jobs' load (docs/development.md). Set before torch loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    mix = {name: getattr(args, name) for name in RECIPE}
    build(
        args.shape, args.precision, args.out, args.seed, args.init_range, args.arch,
        args.train_steps, mix, device=args.device, paged=args.paged,
        last_logits=args.last_logits,
    )  # fmt: skip


if __name__ == "__main__":
    main()
