"""The copy model: a model trained to edit files the way a coding agent asks
(modelkit/copy_model/edit_corpus.py), so that ``python -m bench spec`` has a model whose
answers copy. The committed one, ``bench/models/copy-demo``, is the demo model trained on
(``--base``: its weights, tokenizer and chat template; its turns within its 512-token window)
on the CPU, in about 25 minutes on 2 cores:

    python -m modelkit.copy_model.train train --base models/demo-llama --device cpu --out run \
        --turns 30000 --copy-steps 1000 --steps 3500 --warmup 50 --lr 1e-3 --batch-tokens 4096
    python -m modelkit.copy_model.train build --run run --tokenizer models/demo-llama \
        --out copy --precision int4        # then copy/int4 is bench/models/copy-demo

The demo model copies already (paths and commands), so its copying carries over: the copy
phase's loss fell to 0.02 in 1,000 steps, where models trained from random init stayed near 1
(below). The other way: the benchmark's 135M shape (SmolLM2-135M's layers, a 49,152-token
BPE), or a small one a CPU trains (``--shape copy-cpu``), from random init, in three steps,
the middle one on a GPU machine (or, for the small shape, on the CPU):

    python -m modelkit.copy_model.train tokenizer --out copy-tok          # here, seconds
    python -m modelkit.copy_model.train train --tokenizer copy-tok --out run --seconds 330
    python -m modelkit.copy_model.train build --run run --tokenizer copy-tok --out models/copy-135m

    # the small shape on a CPU: a 4,096-token BPE, a copy phase, then the mix
    python -m modelkit.copy_model.train tokenizer --shape copy-cpu --out copy-tok
    python -m modelkit.copy_model.train train --shape copy-cpu --device cpu --tokenizer copy-tok \
        --out run --turns 40000 --copy-seconds 1080 --seconds 2220 --warmup 100 --lr 3e-3 \
        --batch-tokens 8192

``train`` writes the trained weights as ``weights.bin`` (int8 with a scale per row for the
matrices, float32 for the norms, zlib-compressed: small enough to carry back from a GPU
machine in a few 16 MiB parts) and ``train.json`` (the recipe, the loss curve, a greedy check
of held-out turns). ``build`` turns them into a Hugging Face folder and runs the official
builder: ``int4`` (the benchmark's precision) and ``fp32`` (for exactness), both from the same
dequantized weights: the model *is* those weights.

The training is seeded, but a GPU run is not bit-reproducible across machines; its record
says what it did.

From random init no run has made a model that copies (docs/speculation.md, "Not done yet").
One session's 15 minutes of an H100: 850 steps of the 30-layer shape (388 ms a step, 32k
tokens) ended at an answer loss of 1.03, and 1,159 + 554 steps of a 4-layer one (``--layers
4``, ``--init`` for the second run) at 0.9: the answers take the file's layout and some of its
values but not its names, 0 of 2 held-out turns of each kind exact. Then, with no GPU lent, the
CPU shape (``--shape copy-cpu --device cpu``, 4.1M parameters) with a copy phase first
(``--copy-seconds``: ``COPY_MIX``, mostly whole files read back): 522 copy steps and 1,290
main steps of 8k tokens (55 minutes on 2 cores) ended at 1.12 and 0.83, 0 of 6 held-out turns
of each kind exact, with the same failure; the demo model's copying formed only after about
1,000 copy steps (its ``copy_curve``). What to try next for the 135M shape: a copy phase of
some thousands of steps before the mix (on a GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any

from modelkit.chat_template import CHAT_TEMPLATE
from modelkit.copy_model.model import (
    MAX_TOKENS,
    Start,
    load,
    model_config,
    pack,
    special_ids,
    start,
    unpack,
)
from modelkit.shapes import SHAPES
from modelkit.tokenizer import CHATML_SPECIAL, byte_level_bpe, corpus, save_chatml

# The benchmark's 135M shape, trained on a GPU; or a small one a CPU trains in an hour.
COPY_SHAPES = ("smollm2-135m", "copy-cpu")
HELD_OUT_SEED = 1_000_003


def make_tokenizer(out: Path, seed: int, vocab: int) -> None:
    """A byte-level BPE of ``vocab`` tokens (the shape's vocabulary size) on the turns' texts,
    plain texts and the pseudo-English of modelkit/tokenizer.py (the random words of the free
    turns and plain texts give it enough words to fill the vocabulary)."""
    from modelkit.copy_model.edit_corpus import as_text, turns
    from modelkit.demo.plain_corpus import plain_corpus

    texts = corpus() + [as_text(m, a) for m, a in turns(20000, seed)] + plain_corpus(20000, seed)
    tok = byte_level_bpe(texts, vocab, CHATML_SPECIAL)
    if tok.get_vocab_size() != vocab:
        raise SystemExit(f"the tokenizer has {tok.get_vocab_size()} tokens, not the shape's")
    save_chatml(tok, CHAT_TEMPLATE, out)


def encoded(
    tok_dir: Path,
    n: int,
    seed: int,
    mix: dict[str, float],
    template: str = CHAT_TEMPLATE,
    longest: int = MAX_TOKENS,
) -> list[tuple[list[int], int]]:
    """``n`` turns of ``mix`` as (token ids, where the answer starts), those of at most
    ``longest`` tokens; prompt and answer tokenized apart, as the server tokenizes a prompt
    and the model then writes the answer."""
    from tokenizers import Tokenizer

    from modelkit.copy_model.edit_corpus import turns
    from modelkit.demo.template import renderer

    render = renderer(template)
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    pairs = [
        (render(m, None), a.removesuffix("<|im_end|>") + "<|im_end|>")
        for m, a in turns(n, seed, mix)
    ]
    prompts = tok.encode_batch([p for p, _ in pairs], add_special_tokens=False)
    answers = tok.encode_batch([a for _, a in pairs], add_special_tokens=False)
    out = []
    for p, a in zip(prompts, answers, strict=True):
        if len(p.ids) + len(a.ids) <= longest:
            out.append((p.ids + a.ids, len(p.ids)))
    return out


def batches(data: list[tuple[list[int], int]], tokens: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar lengths, at most ``tokens`` tokens each (padded), shuffled."""
    order = sorted(range(len(data)), key=lambda i: len(data[i][0]))
    groups: list[list[int]] = [[]]
    for i in order:
        if (len(groups[-1]) + 1) * len(data[i][0]) > tokens:
            groups.append([])
        groups[-1].append(i)
    rng.shuffle(groups)
    return groups


def train(args: argparse.Namespace) -> None:
    import torch
    from transformers import LlamaForCausalLM

    from modelkit.copy_model.edit_corpus import COPY_MIX, MIX

    started = time.monotonic()
    torch.manual_seed(args.seed)
    if args.device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    rng = random.Random(args.seed)
    ids = special_ids(args.tokenizer)
    begin = start(args.shape, args.layers, args.base, args.init)
    shape = begin.shape
    model = LlamaForCausalLM._from_config(model_config(ids, shape), attn_implementation="sdpa")
    if begin.state is not None:
        load(model, begin.state)
    model.to(args.device).train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(
        model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1,
        fused=args.device == "cuda",
    )  # fmt: skip
    phases: dict[str, Any] = {}
    for name, mix, seconds, steps, seed in (
        ("copy", COPY_MIX, args.copy_seconds, args.copy_steps, args.seed + 1),
        ("main", MIX, args.seconds, args.steps, args.seed),
    ):
        if not seconds and not steps:
            continue
        data = encoded(args.tokenizer, args.turns, seed, mix, begin.template, begin.longest)
        print(f"{name} phase: {len(data):,} turns, {sum(len(d[0]) for d in data):,} tokens, "
              f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
        phases[name] = phase(model, opt, data, ids["pad_token_id"], rng, args, seconds, steps)
    model.eval()
    check = greedy_check(model, args.tokenizer, args.device, args.check, begin)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "chat_template.jinja").write_text(begin.template)
    (args.out / "weights.bin").write_bytes(
        pack(
            {
                k: v.float().cpu()
                for k, v in model.state_dict().items()
                if k != "lm_head.weight" or not model.config.tie_word_embeddings  # the embedding's
            }
        )
    )
    record = {
        "shape": shape, "base": args.base and str(args.base), "longest": begin.longest,
        "parameters": params, "seed": args.seed, "turns": args.turns,
        "batch_tokens": args.batch_tokens, "lr": args.lr, "warmup": args.warmup,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
        "torch": torch.__version__, "phases": phases, "check": check,
    }  # fmt: skip
    (args.out / "train.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "phases"}, indent=1), flush=True)


def phase(
    model: Any,
    opt: Any,
    data: list[tuple[list[int], int]],
    pad: int,
    rng: random.Random,
    args: argparse.Namespace,
    seconds: float | None,
    steps: int | None,
) -> dict[str, Any]:
    """One phase of training on ``data``: a warm-up, then a cosine down to a tenth of the
    learning rate over ``steps``, or over as many steps as fit in ``seconds`` (timed on the
    phase's first 30 steps). Its record: steps, time, the answer loss every ``log_every``
    steps."""
    import torch

    device = args.device
    total = steps  # fixed once the first steps are timed, when only seconds are given
    warmup = args.warmup
    curve: list[tuple[int, float]] = []
    window: list[float] = []
    groups: list[list[int]] = []
    step = 0
    t_train = t10 = time.monotonic()
    while total is None or step < total:
        lr_now = args.lr * (step + 1) / warmup if step < warmup else None
        if lr_now is None:
            span = max(1, (total or 10**9) - warmup)
            lr_now = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / span)))
        for g in opt.param_groups:
            g["lr"] = lr_now
        if not groups:
            groups = batches(data, args.batch_tokens, rng)
        idx = groups.pop()
        width = max(len(data[i][0]) for i in idx)
        x = torch.full((len(idx), width), pad, dtype=torch.long)
        r = torch.zeros((len(idx), width), dtype=torch.bool)
        for row, i in enumerate(idx):
            seq, at = data[i]
            x[row, : len(seq)] = torch.tensor(seq)
            r[row, at : len(seq)] = True
        x, r = x.to(device), r.to(device)
        # Right padding under a causal mask: no real token sees a pad, so no attention mask.
        # The loss is the answers' alone, so the head runs on the answers' positions only.
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            hidden = model.model(input_ids=x).last_hidden_state[:, :-1]
            chosen = r[:, 1:]
            logits = model.lm_head(hidden[chosen]).float()
        loss = torch.nn.functional.cross_entropy(logits, x[:, 1:][chosen])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        window.append(float(loss.detach()))
        step += 1
        if total is None and step == 30:  # time 20 steps after 10 of warm-up, then fix the run
            if device == "cuda":
                torch.cuda.synchronize()
            per_step = (time.monotonic() - t10) / 20
            total = max(warmup + 1, int((seconds or 0) / per_step))
            print(f"  {per_step * 1000:.0f} ms a step: {total} steps", flush=True)
        if step == 10:
            if device == "cuda":
                torch.cuda.synchronize()
            t10 = time.monotonic()
        if step % args.log_every == 0 or step == total:
            curve.append((step, round(sum(window) / len(window), 4)))
            window = []
            print(f"  step {step:5d}/{total}  answer loss {curve[-1][1]:.4f}  "
                  f"{time.monotonic() - t_train:6.1f} s", flush=True)  # fmt: skip
    return {"steps": step, "train_seconds": round(time.monotonic() - t_train, 1), "curve": curve}


def greedy_check(model: Any, tok_dir: Path, device: str, n: int, begin: Start) -> dict[str, Any]:
    """Greedy answers to ``n`` held-out turns of each kind (of those the run trains on: at
    most ``begin.longest`` tokens): how many equal the reference, and the first differing
    answer of each kind, for the record."""
    import torch
    from tokenizers import Tokenizer

    from modelkit.copy_model.edit_corpus import KINDS, turn
    from modelkit.demo.template import renderer

    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    eos = tok.token_to_id("<|im_end|>")
    render = renderer(begin.template)
    rng = random.Random(HELD_OUT_SEED)
    out: dict[str, Any] = {}
    for kind in KINDS:
        exact, first_miss, checked = 0, None, 0
        while checked < n:
            messages, answer = turn(kind, rng)
            answer = answer.removesuffix("<|im_end|>")
            prompt = tok.encode(render(messages, None), add_special_tokens=False).ids
            wanted = len(tok.encode(answer, add_special_tokens=False).ids)
            if len(prompt) + wanted + 1 > begin.longest:
                continue
            checked += 1
            x = torch.tensor([prompt], device=device)
            with torch.no_grad():
                y = model.generate(
                    x, max_new_tokens=wanted + 8, do_sample=False,
                    eos_token_id=eos, pad_token_id=eos,
                )  # fmt: skip
            got = y[0, len(prompt) :].tolist()
            text = tok.decode([t for t in got if t != eos])
            if text == answer and eos in got:
                exact += 1
            elif first_miss is None:
                first_miss = {"want": answer[:300], "got": text[:300]}
        out[kind] = {"exact": exact, "of": n, "first_miss": first_miss}
        print(f"  check {kind}: {exact}/{n} exact", flush=True)
    return out


def build(args: argparse.Namespace) -> None:
    """The ONNX folders from a run's weights (``weights.bin``, or its parts ``weights.bin.N``
    joined in order)."""
    import tempfile

    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from modelkit.builder import run_builder

    parts = sorted(args.run.glob("weights.bin.*"), key=lambda p: int(p.suffix[1:]))
    blob = (
        b"".join(p.read_bytes() for p in parts)
        if parts
        else (args.run / "weights.bin").read_bytes()
    )
    state = unpack(blob)
    shape = json.loads((args.run / "train.json").read_text())["shape"]
    model = LlamaForCausalLM(model_config(special_ids(args.tokenizer), shape))
    load(model, state)
    template_file = args.run / "chat_template.jinja"  # a run from a base: the base's
    template = template_file.read_text() if template_file.exists() else CHAT_TEMPLATE
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp) / "hf"
        model.to(torch.float32).save_pretrained(hf)
        AutoTokenizer.from_pretrained(args.tokenizer).save_pretrained(hf)
        for precision in args.precision:
            out = args.out / precision
            extra = ["int4_accuracy_level=4"] if precision == "int4" else []
            run_builder(hf, out, precision, extra, cache_dir=Path(tmp) / "cache")
            (out / "chat_template.jinja").write_text(template)
            if (args.run / "train.json").exists():
                (out / "train.json").write_text((args.run / "train.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenizer", help="train the BPE (on the CPU, seconds)")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--seed", type=int, default=7)
    t.add_argument("--shape", choices=COPY_SHAPES, default="smollm2-135m")
    tr = sub.add_parser("train", help="train the model (on a GPU)")
    tr.add_argument("--tokenizer", type=Path, help="the BPE's folder (default: --base's)")
    tr.add_argument("--base", type=Path, help="train on from this ONNX model folder (a Llama)")
    tr.add_argument("--out", type=Path, required=True)
    tr.add_argument("--device", default="cuda", help="cuda, or cpu (every core)")
    tr.add_argument("--seed", type=int, default=1234)
    tr.add_argument("--turns", type=int, default=120_000)
    tr.add_argument("--shape", choices=COPY_SHAPES, default="smollm2-135m")
    tr.add_argument("--copy-seconds", type=float, help="a copy phase first, of this long")
    tr.add_argument("--copy-steps", type=int, help="a copy phase of this many steps")
    tr.add_argument("--seconds", type=float, default=330.0, help="training time: fixes the steps")
    tr.add_argument("--steps", type=int, help="steps instead of --seconds")
    tr.add_argument("--warmup", type=int, default=150)
    tr.add_argument("--lr", type=float, default=2e-3)
    tr.add_argument("--batch-tokens", type=int, default=65536)
    tr.add_argument("--log-every", type=int, default=50)
    tr.add_argument("--check", type=int, default=16, help="held-out turns of each kind checked")
    tr.add_argument("--init", type=Path, help="an earlier run's weights.bin to go on from")
    tr.add_argument("--layers", type=int, help="fewer layers: a dry run of the script on a CPU")
    b = sub.add_parser("build", help="the ONNX folders from a run (on the CPU)")
    b.add_argument("--run", type=Path, required=True)
    b.add_argument("--tokenizer", type=Path, required=True)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--precision", nargs="+", default=["int4", "fp32"])
    args = ap.parse_args()
    if args.cmd == "tokenizer":
        make_tokenizer(args.out, args.seed, SHAPES[args.shape]["vocab_size"])
    elif args.cmd == "train":
        args.tokenizer = args.tokenizer or args.base
        if args.tokenizer is None:
            ap.error("train needs --tokenizer or --base")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
        train(args)
    else:
        build(args)


if __name__ == "__main__":
    main()
