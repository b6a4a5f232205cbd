"""The demo model with an int8 KV cache, and how far it answers like the float one.

``build`` reads the committed demo model's weights back out of its graph
(modelkit/onnx_weights.py, as ``modelkit.demo.tune`` does) and exports them as the demo was
exported (int4, accuracy level 4, every position's logits), with an int8 KV cache
(modelkit/kv_quant.py) and, with ``--float-out``, again with its float one: a pair that differs
in the KV cache alone. ``--context`` trims the context (the rotary tables of 65,536 positions are
8 MiB of the demo's 9).

``corpus`` writes calibration text like the demo's traffic, as ``--kv-calibration`` takes it:
chat and agent turns from the generators and seeds of its training (none from the held-out
stream). Calibrated on the
builder's own English passages instead, the int8 demo's logits moved four times as far.

``compare`` runs the demo's held-out check prompts (modelkit/demo/check.py: 200 chat turns and 12
agent turns of about 2,000 to 17,000 tokens) greedily through og.Generator on the float folder,
and feeds the same tokens to the int8 folder: an answer is identical when the int8 model's
greedy pick equals the float one's at every step (then its own greedy answer is the same), and
the logit difference is the mean of ``|int8 - float|`` over every logit of every step.

    python -m modelkit.demo.kv_int8 corpus --out demo-text.json
    python -m modelkit.demo.kv_int8 build --out demo-kv8 --float-out demo-float \
        --kv-calibration demo-text.json
    python -m modelkit.demo.kv_int8 compare demo-float demo-kv8
    python -m modelkit.demo.kv_int8 build --context 4096 --out tests/models/demo-kv8
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from modelkit.builder import run_builder
from modelkit.demo.agent_corpus import agent_corpus
from modelkit.demo.check import LONG_CHECK_LINES
from modelkit.demo.corpus import corpus as chat_corpus
from modelkit.demo.template import renderer
from modelkit.demo.train import HELD_OUT_SEED_OFFSET, held_out
from modelkit.kv_quant import SCALES_FILE, calibrate, kv_options, share_buffers
from modelkit.offline import quiet_threads

DEMO_MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "demo-llama"
TRAINING_SEED = 1  # the demo's build seed (training.json); agent turns are drawn from seed + 1
AGENT_LINES = (4, 40)  # training.json's agent_lines
DEMO_OPTIONS = ["int4_accuracy_level=4"]  # how models/demo-llama was exported
ROOM = 96  # new tokens an answer is given, as the check gives them


def build(out: Path, float_out: Path | None, context: int, corpus: Path | None) -> None:
    from transformers import AutoTokenizer

    from modelkit.demo.tune import base_model

    tok = AutoTokenizer.from_pretrained(DEMO_MODEL_DIR)
    model = base_model(DEMO_MODEL_DIR, tok)
    if context:
        model.config.max_position_embeddings = context
    template = (DEMO_MODEL_DIR / "chat_template.jinja").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        hf, cache = Path(tmp) / "hf", Path(tmp) / "cache"
        model.save_pretrained(hf)
        tok.save_pretrained(hf)
        base = float_out or Path(tmp) / "float-kv"
        run_builder(hf, base, "int4", DEMO_OPTIONS, cache_dir=cache, quiet=True)
        out.mkdir(parents=True, exist_ok=True)
        calibrate(base, hf, out / SCALES_FILE, corpus, quiet=True)
        options = [*DEMO_OPTIONS, *kv_options(out / SCALES_FILE)]
        run_builder(hf, out, "int4", options, cache_dir=cache, quiet=True)
    share_buffers(out)
    for folder in (out, float_out):
        if folder is not None:
            (folder / "chat_template.jinja").write_text(template)


def calibration_text(out: Path, chats: int = 400, agents: int = 40) -> None:
    """Turns drawn as the demo's training drew them, prompt and reply, as a JSON list."""
    template = (DEMO_MODEL_DIR / "chat_template.jinja").read_text()
    render = renderer(template)
    pairs = chat_corpus(render, chats, TRAINING_SEED)
    pairs += agent_corpus(render, agents, TRAINING_SEED + 1, AGENT_LINES)
    out.write_text(json.dumps([prompt + reply for prompt, reply in pairs]))


def prompts(template: str, seed: int, n: int, long: int) -> dict[str, list[str]]:
    """The check's held-out prompts (modelkit/demo/check.py), by kind."""
    rng = random.Random(seed + HELD_OUT_SEED_OFFSET)
    agent = [
        agent_corpus(renderer(template), 1, rng.randrange(1 << 30), LONG_CHECK_LINES)[0]
        for _ in range(long)
    ]
    return {
        "chat": [p for p, _ in held_out(template, seed, n)],
        "agent_long": [p for p, _ in agent],
    }


def _generator(og: Any, model: Any, length: int, window: int) -> Any:
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=max(length, window), do_sample=False)
    return og.Generator(model, params)


def one(og: Any, base: Any, int8: Any, ids: list[int], window: int, eos: int) -> dict[str, Any]:
    """The float model's greedy answer to ``ids``, fed to the int8 model token by token."""
    a = _generator(og, base, len(ids) + ROOM, window)
    b = _generator(og, int8, len(ids) + ROOM, window)
    a.append_tokens(ids)
    b.append_tokens(ids)
    diffs, agree, steps = [], True, 0
    while steps < ROOM:
        la = np.asarray(a.get_logits(), dtype=np.float32).reshape(-1)
        lb = np.asarray(b.get_logits(), dtype=np.float32).reshape(-1)
        diffs.append(float(np.abs(la - lb).mean()))
        token = int(la.argmax())
        agree = agree and int(lb.argmax()) == token
        steps += 1
        if token == eos or steps == ROOM:
            break
        a.append_tokens([token])
        b.append_tokens([token])
    return {"identical": agree, "steps": steps, "diff": diffs}


def compare(base_dir: Path, int8_dir: Path, seed: int, n: int, long: int) -> dict[str, Any]:
    import onnxruntime_genai as og

    base, int8 = og.Model(str(base_dir)), og.Model(str(int8_dir))
    tok = og.Tokenizer(base)
    config = json.loads((base_dir / "genai_config.json").read_text())["model"]
    window = int((config["decoder"].get("sliding_window") or {}).get("window_size", 0))
    template = (base_dir / "chat_template.jinja").read_text()
    report: dict[str, Any] = {}
    every: list[float] = []
    for kind, texts in prompts(template, seed, n, long).items():
        runs = [
            one(og, base, int8, list(tok.encode(t)), window, int(config["eos_token_id"]))
            for t in texts
        ]
        diffs = [d for r in runs for d in r["diff"]]
        every += diffs
        report[kind] = {
            "answers": len(runs),
            "identical": sum(r["identical"] for r in runs),
            "steps": sum(r["steps"] for r in runs),
            "mean_abs_logit_diff": round(float(np.mean(diffs)), 5),
            "max_step_mean_abs_logit_diff": round(float(np.max(diffs)), 5),
        }
    answers = sum(r["answers"] for r in report.values())
    identical = sum(r["identical"] for r in report.values())
    report["all"] = {
        "answers": answers,
        "identical": identical,
        "identical_share": round(identical / answers, 4),
        "mean_abs_logit_diff": round(float(np.mean(every)), 5),
    }
    return report


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="the demo's weights with an int8 KV cache")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--float-out", type=Path, help="also the same export with a float KV cache")
    b.add_argument("--context", type=int, default=0, help="trim the context to this many tokens")
    b.add_argument("--kv-calibration", type=Path, help="calibration text (modelkit/kv_quant.py)")
    t = sub.add_parser("corpus", help="calibration text like the demo's traffic")
    t.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare", help="the held-out prompts, float KV against int8 KV")
    c.add_argument("float_dir", type=Path)
    c.add_argument("int8_dir", type=Path)
    c.add_argument("--seed", type=int, default=1, help="the demo build's seed")
    c.add_argument("--n", type=int, default=200, help="held-out chat turns")
    c.add_argument("--long", type=int, default=12, help="held-out long agent turns")
    args = ap.parse_args()
    quiet_threads()
    if args.command == "build":
        build(args.out, args.float_out, args.context, args.kv_calibration)
    elif args.command == "corpus":
        calibration_text(args.out)
    else:
        report = compare(args.float_dir, args.int8_dir, args.seed, args.n, args.long)
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
