"""Which last phase teaches the demo model plain continuation and keeps what it does? Starts
from a build's trained weights before any plain phase (a ``modelkit.decoder`` run with
``KEEP_HF_DIR=1``: its folder holds ``training.json`` and ``hf-main/``, the weights before its
plain phase, or ``hf/`` if it had none), runs the plain phase of ``--plain SHARE --plain-steps
N --plain-lr LR`` (and ``--plain-mlp-only``) for each candidate, exports it with the build's own
builder call and runs the build's check (modelkit/demo/check.py).

The phase is the build's own (modelkit/demo/train.py's ``plain_phase`` on the same examples,
regenerated from the record's recipe), so a full build with the same options gives the same
model on the same machine: each candidate predicts it, in minutes instead of a full build.

    KEEP_HF_DIR=1 python -m modelkit.decoder <the committed recipe> --out BASE
    python -m modelkit.demo.plain_grid BASE --try 600,0.1,3e-4 --try 300,0.1,1e-4 --out GRID
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from modelkit.builder import run_builder
from modelkit.demo.check import check
from modelkit.demo.template import DEMO_TEMPLATE
from modelkit.demo.train import plain_phase, training_data
from modelkit.offline import quiet_threads


def base_turns(base: Path, turns: tuple[int, int]) -> tuple[Any, list[Any], dict[str, Any]]:
    """The tokenizer, the main phase's examples and the record of ``base``. ``turns``: the
    recipe's --chat-turns and --agent-turns (the record counts the turns kept, not asked for)."""
    from transformers import AutoTokenizer

    record = json.loads((base / "training.json").read_text())
    tok = AutoTokenizer.from_pretrained(weights(base))
    data, _ = training_data(
        tok, DEMO_TEMPLATE, seed=record["seed"], chat_turns=turns[0], agent_turns=turns[1],
        agent_lines=tuple(record["agent_lines"]), agent_max_tokens=record["agent_max_tokens"],
        copying=record["copying"], copy_depth=record["copy_depth"],
        agent_tools=record["agent_tools"], made_up=record["made_up"], window=record["window"],
    )  # fmt: skip
    return tok, data, record


def weights(base: Path) -> Path:
    return base / "hf-main" if (base / "hf-main").is_dir() else base / "hf"


def candidate(
    base: Path, tok: Any, data: list[Any], record: dict[str, Any],
    plain: tuple[int, float, float, bool],
    out: Path,
) -> dict[str, Any]:  # fmt: skip
    """The plain phase (steps, share, peak learning rate) on ``base``'s weights, exported into
    ``out`` and checked."""
    from transformers import MistralForCausalLM

    steps, share, lr, mlp_only = plain
    model = MistralForCausalLM.from_pretrained(weights(base))
    started = time.monotonic()
    run = plain_phase(
        model, tok, data, share=share, steps=steps, lr=lr, seed=record["seed"],
        batch=record["batch"], batch_tokens=record["batch_tokens"], mlp_only=mlp_only,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp) / "hf"
        model.save_pretrained(hf)
        tok.save_pretrained(hf)
        out.mkdir(parents=True, exist_ok=True)
        run_builder(
            hf, out, "int4", ["int4_accuracy_level=4"], cache_dir=Path(tmp) / "cache", quiet=True
        )
    if not (out / "chat_template.jinja").exists():
        (out / "chat_template.jinja").write_text(DEMO_TEMPLATE)
    return {
        "plain_steps": steps,
        "plain": share,
        "plain_lr": lr,
        "plain_mlp_only": mlp_only,
        "plain_texts": run["texts"],
        "final_loss": run["curve"][-1][1],
        "seconds": round(time.monotonic() - started, 1),
        "check": check(out, DEMO_TEMPLATE, record["seed"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("base", type=Path, help="a build folder with hf/ and training.json")
    ap.add_argument(
        "--try",
        dest="tries",
        action="append",
        required=True,
        help="STEPS,SHARE,LR[,mlp] of a candidate plain phase (repeatable; mlp: --plain-mlp-only)",
    )
    ap.add_argument("--out", type=Path, required=True, help="one exported folder per candidate")
    ap.add_argument("--chat-turns", type=int, default=12000, help="the base recipe's")
    ap.add_argument("--agent-turns", type=int, default=12000, help="the base recipe's")
    args = ap.parse_args()
    quiet_threads()  # as modelkit.decoder
    tok, data, record = base_turns(args.base, (args.chat_turns, args.agent_turns))
    for spec in args.tries:
        steps, share, lr, *mlp = spec.split(",")
        out = args.out / f"s{steps}-p{share}-lr{lr}{'-mlp' if mlp else ''}"
        plain = (int(steps), float(share), float(lr), mlp == ["mlp"])
        result = candidate(args.base, tok, data, record, plain, out)
        (out / "grid.json").write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1), flush=True)


if __name__ == "__main__":
    main()
