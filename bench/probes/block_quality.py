"""``python -m bench.probes.block_quality HF_DIR INT4_DIR [INT4_DIR ...]``: how far each int4
build's next-token logits are from the HF weights' own (transformers, float32), on the same
prompts: top-1 agreement, the mean absolute logit difference (and it over the reference
logits' standard deviation), and the KL divergence of the softmax, per build.

It weighs a quantization choice (``main_genai.py export --block-size``) by its error against
the weights it came from. On the benchmark shapes' random weights, which have no outliers,
it understates what a larger block costs on trained weights, whose outliers widen a block's
scale; read it as a floor.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def prompts(folder: Path, n: int, length: int, seed: int) -> list[list[int]]:
    """``n`` chat prompts of about ``length`` tokens, as ``bench run`` makes them."""
    import onnxruntime_genai as og

    from bench.harness.prompts import PromptMaker

    maker = PromptMaker(og.Tokenizer(og.Model(str(folder))))
    return [maker.chat(length, seed + i)[1] for i in range(n)]


def reference(hf_dir: Path, ids: list[list[int]]) -> list[np.ndarray]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(hf_dir), torch_dtype=torch.float32).eval()
    out = []
    with torch.inference_mode():
        for row in ids:
            logits = model(torch.tensor([row])).logits[0, -1]
            out.append(logits.numpy().astype(np.float64))
    return out


def build_logits(folder: Path, ids: list[list[int]]) -> list[np.ndarray]:
    """The last position's logits of one prefill each, on a bare onnxruntime session."""
    from bench.probes.prefill_profile import _session

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        _, decoder, kv = _session(folder, max(map(len, ids)) + 8, 2, tmp, profiled=False)
        for row in ids:
            a = np.array([row], dtype=np.int64)
            logits = decoder.run(a, np.ones_like(a), np.arange(a.shape[1])[None], kv, (0, 1))
            out.append(np.asarray(logits, dtype=np.float64).reshape(-1, logits.shape[-1])[-1])
    return out


def compare(ref: list[np.ndarray], got: list[np.ndarray]) -> dict[str, Any]:
    def softmax(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max())
        return e / e.sum()

    top1 = [int(np.argmax(r) == np.argmax(g)) for r, g in zip(ref, got, strict=True)]
    diff = [float(np.mean(np.abs(r - g))) for r, g in zip(ref, got, strict=True)]
    rel = [float(np.mean(np.abs(r - g)) / np.std(r)) for r, g in zip(ref, got, strict=True)]
    kl = []
    for r, g in zip(ref, got, strict=True):
        p, q = softmax(r), softmax(g)
        kl.append(float(np.sum(p * (np.log(p + 1e-30) - np.log(q + 1e-30)))))
    return {
        "prompts": len(ref),
        "top1_agreement": sum(top1) / len(top1),
        "mean_abs_logit_diff": float(np.mean(diff)),
        "mean_abs_diff_over_logit_std": float(np.mean(rel)),
        "kl_mean": float(np.mean(kl)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hf", type=Path, help="the HF weights the builds came from")
    ap.add_argument("builds", type=Path, nargs="+", help="int4 model folders")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ids = prompts(args.builds[0], args.prompts, args.length, args.seed)
    ref = reference(args.hf, ids)
    report = {b.name: compare(ref, build_logits(b, ids)) for b in args.builds}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
