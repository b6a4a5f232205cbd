"""Does the demo shape learn to copy from its context, and at which learning rate? Trains a few
sliding-window Mistral shapes from scratch on "Repeat exactly: <made-up path-like string>" turns
alone and prints, every sixth of the run, the reply loss and the share of 64 fresh strings copied
exactly (greedy). Needs torch and transformers (requirements-build.txt); a GPU makes it minutes.

    python -m modelkit.demo.copy_grid
"""

from __future__ import annotations

import json
import math
import random
import string
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

dev = "cuda" if torch.cuda.is_available() else "cpu"
tok = AutoTokenizer.from_pretrained(Path(__file__).resolve().parents[2] / "models" / "demo-llama")
CH = string.ascii_lowercase + string.digits + "_-."


def make(rng: random.Random) -> tuple[list[int], list[int]]:
    segs = [
        "".join(rng.choice(CH) for _ in range(rng.randint(2, 12))) for _ in range(rng.randint(1, 6))
    ]
    x = "/".join(segs)
    x = ("/" + x) if rng.random() < 0.6 else x
    p = f"<|im_start|>user\nRepeat exactly: {x}<|im_end|>\n<|im_start|>assistant\n"
    return tok.encode(p, add_special_tokens=False), tok.encode(
        x + "<|im_end|>", add_special_tokens=False
    )


def run(
    width: int, layers: int, heads: int, lr: float, steps: int, batch: int, seed: int = 0
) -> dict[str, Any]:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    erng = random.Random(99)
    cfg = MistralConfig(
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        vocab_size=len(tok),
        max_position_embeddings=4096,
        sliding_window=256,
        tie_word_embeddings=True,
        rope_theta=10000.0,
    )
    model = MistralForCausalLM(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: (
            (s + 1) / warm
            if s < warm
            else 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm)))
        ),
    )
    evals = [make(erng) for _ in range(64)]
    hist = []
    t0 = time.time()
    for step in range(steps):
        bt = [make(rng) for _ in range(batch)]
        W = max(len(a) + len(b) for a, b in bt)
        ids = torch.zeros((batch, W), dtype=torch.long)
        m = torch.zeros((batch, W), dtype=torch.long)
        w = torch.zeros((batch, W))
        for r, (a, b) in enumerate(bt):
            s = a + b
            ids[r, : len(s)] = torch.tensor(s)
            m[r, : len(s)] = 1
            w[r, len(a) : len(s)] = 1
        ids, m, w = ids.to(dev), m.to(dev), w.to(dev)
        lg = model(input_ids=ids, attention_mask=m).logits[:, :-1]
        nll = torch.nn.functional.cross_entropy(
            lg.reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
        ).view(batch, -1)
        loss = (nll * w[:, 1:]).sum() / w[:, 1:].sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % (steps // 6) == 0:
            model.eval()
            ok = 0
            with torch.no_grad():
                for a, b in evals:
                    full = torch.tensor([a + b], device=dev)
                    pred = model(input_ids=full).logits[0, len(a) - 1 : -1].argmax(-1).tolist()
                    ok += pred == b  # teacher-forced all-correct = greedy exact copy
            model.train()
            hist.append((step + 1, round(float(loss), 3), ok / len(evals)))
    return {
        "width": width,
        "layers": layers,
        "heads": heads,
        "lr": lr,
        "steps": steps,
        "batch": batch,
        "hist": hist,
        "s": round(time.time() - t0, 1),
    }


for cfg in [
    (128, 2, 4, 3e-3, 6000, 16),
    (128, 2, 4, 1e-3, 6000, 16),
    (256, 2, 8, 1e-3, 6000, 16),
    (128, 3, 4, 1e-3, 6000, 16),
]:
    print(json.dumps(run(*cfg)), flush=True)
