"""A last phase on a built demo model: make the tokens that decide its turns win by a margin.

The demo's agent behaviour rests on a few tokens (modelkit/demo/margins.py): the closing quote of
a copied argument, the tokens that close a call, the end of the turn. After the plain-text phase
some of them led by less than the ~1.2 that logits move between CPU kinds' int4 kernels, so one
machine closed ``"echo hello"`` where another wrote ``echo hello.`` and prose after it. This
phase goes on from the built model's weights (read back from its ONNX graph,
modelkit/onnx_weights.py) on the turns and plain texts of its own recipe (its training.json),
with changes that make those tokens decidable and decided:

- a chat answer is cut to its first sentence: the corpus's one to three sentences made the end
  of a turn after the first a coin toss, which no training can make decisive;
- the deciding tokens of each reply weigh ``--focus-weight`` in the loss;
- ``--failed`` agent turns whose call failed (an error naming a long made-up path, a command
  not found) are added, answered in a short sentence that copies none of it: after such a
  result the model copied the path back and looped on it until the token limit;
- ``--exec`` agent turns that ran a command, with its result in the shape Codex CLI gives it
  (chunk id, wall time, exit code, output), answered with the output when the code is 0 and as
  failed otherwise: given the recipe's shape alone, the model answered a failed ``git status``
  with "It says: The 0" and looped on the wall time's zeros.

Then it exports the folder at int4 as the decoder build does, and checks it.

    python -m modelkit.demo.tune --base /tmp/demo-base --steps 1600 --lr 3e-4 \\
        --focus-weight 12 --failed 2400 --exec 2400 --out models/demo-llama

``--base`` is the decoder build's folder (modelkit/decoder.py), before any tuning; the record of
this phase is added to its training.json, and the check's result replaced.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from modelkit.builder import run_builder
from modelkit.demo.agent_corpus import exec_corpus, failed_corpus
from modelkit.demo.check import check
from modelkit.demo.margins import deciding
from modelkit.demo.template import renderer
from modelkit.demo.train import Example, encode_pairs, plain_data, train, training_data
from modelkit.offline import quiet_threads
from modelkit.shapes import arch_config_kwargs

# A chat answer's sentences (modelkit/demo/corpus.py ``sentence``) and where they part.
SENTENCE_START = re.compile(r"(?:The|I think|A|Yes,|Every) ")
EOT = "<|im_end|>"
FAILED_SEED_OFFSET = 5  # the failed calls' stream (modelkit/demo/train.py uses 1 to 3)
EXEC_SEED_OFFSET = 6  # the commands' results in Codex's shape


def first_sentence(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Chat answers of several corpus sentences cut to the first one. Calls, answers after a
    tool's result (they repeat it) and copies are kept as they are."""
    out = []
    for prompt, reply in pairs:
        text = reply.removesuffix(EOT)
        last_turn = prompt.rsplit("<|im_start|>user", 1)[-1]
        parts = text.split(". ")
        if (
            len(parts) > 1
            and "<tool_response>" not in last_turn
            and all(SENTENCE_START.match(p) for p in parts)
        ):
            reply = parts[0] + "." + EOT
        out.append((prompt, reply))
    return out


def focus(tok: Any, data: list[Example], eos: int) -> dict[int, list[int]]:
    """Per example, the positions of its reply's deciding tokens (modelkit/demo/margins.py).
    Not in plain texts: where one ends is a guess (two to eight lines), and weighing its end
    more would only make the model end plain prompts sooner."""
    out: dict[int, list[int]] = {}
    for n, (ids, reply_at, _) in enumerate(data):
        if reply_at == 0:  # a plain text: it is all reply
            continue
        reply = ids[reply_at:]
        pieces = ["" if t == eos else tok.decode([t]) for t in reply]
        ended = reply.index(eos) if eos in reply else None
        found = [reply_at + i for _, i in deciding(pieces, ended) if i >= 0]
        if found:
            out[n] = found
    return out


def base_model(base: Path, tok: Any) -> Any:
    """The built model's weights as a Hugging Face Mistral with its sliding window."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    from modelkit.onnx_weights import read_decoder

    shape, weights = read_decoder(base)
    decoder = json.loads((base / "genai_config.json").read_text())["model"]["decoder"]
    window = decoder["sliding_window"]["window_size"]
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    layout = arch_config_kwargs("mistral", shape) | {"sliding_window": window}
    config = MistralConfig(**(shape | layout), pad_token_id=tok.pad_token_id, **ids)
    model = MistralForCausalLM(config)
    state = {name: torch.from_numpy(w) for name, w in weights.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise SystemExit(f"weights that do not fit: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    return model


def tune(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    record = json.loads((args.base / "training.json").read_text())
    if "tune" in record:
        raise SystemExit(f"{args.base} is tuned already: give the decoder build's folder")
    template = (args.base / "chat_template.jinja").read_text()
    tok = AutoTokenizer.from_pretrained(args.base)
    started = time.monotonic()
    data, _ = training_data(
        tok, template, seed=record["seed"],
        chat_turns=record["conversations"] - record["agent_turns"],
        agent_turns=record["agent_turns"], agent_lines=tuple(record["agent_lines"]),
        agent_max_tokens=record["agent_max_tokens"], copying=record["copying"],
        copy_depth=record["copy_depth"], agent_tools=record["agent_tools"],
        made_up=record["made_up"], window=record["window"], edit=first_sentence,
    )  # fmt: skip
    failed = failed_corpus(
        renderer(template), args.failed, record["seed"] + FAILED_SEED_OFFSET,
        tuple(record["agent_lines"]), record["copy_depth"], record["agent_tools"],
        record["made_up"],
    )  # fmt: skip
    failed += exec_corpus(
        renderer(template), args.exec, record["seed"] + EXEC_SEED_OFFSET,
        tuple(record["agent_lines"]), record["copy_depth"], record["agent_tools"],
        record["made_up"],
    )  # fmt: skip
    data += encode_pairs(tok, failed, record["agent_max_tokens"])
    data += plain_data(tok, record["plain"], len(data), record["seed"])
    weights = focus(tok, data, tok.eos_token_id)
    print(
        f"tune: {len(data):,} examples, {sum(map(len, weights.values())):,} deciding tokens "
        f"in {len(weights):,} of them, weight {args.focus_weight}",
        flush=True,
    )
    model = base_model(args.base, tok)
    run = train(
        model, data, steps=args.steps, batch=record["batch"], lr=args.lr, seed=args.seed,
        pad_id=tok.pad_token_id, batch_tokens=record["batch_tokens"], focus=weights,
        focus_weight=args.focus_weight,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        hf, built = Path(tmp) / "hf", Path(tmp) / "built"
        model.save_pretrained(hf)
        tok.save_pretrained(hf)
        run_builder(hf, built, "int4", ["int4_accuracy_level=4"], cache_dir=Path(tmp) / "c")
        (built / "chat_template.jinja").write_text(template)
        # --out may be --base itself: its files are replaced only once all are built
        shutil.copytree(built, args.out, dirs_exist_ok=True)
    tuned = {
        "steps": args.steps, "lr": args.lr, "seed": args.seed, "failed": args.failed,
        "exec": args.exec,
        "focus_weight": args.focus_weight, "examples": len(data), "curve": run["curve"],
        "seconds": run["seconds"], "total_seconds": round(time.monotonic() - started, 1),
    }  # fmt: skip
    record = {**record, "tune": tuned, "check": check(args.out, template, record["seed"])}
    (args.out / "training.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--base", type=Path, required=True, help="a built demo model folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=1600)
    ap.add_argument("--lr", type=float, default=3e-4, help="peak learning rate (AdamW)")
    ap.add_argument("--seed", type=int, default=1, help="the batches' order")
    ap.add_argument("--failed", type=int, default=2400, help="agent turns whose call failed")
    ap.add_argument(
        "--exec", type=int, default=2400, help="agent turns that ran a command (Codex's shape)"
    )
    ap.add_argument(
        "--focus-weight", type=float, default=12.0, help="the deciding tokens' weight in the loss"
    )
    args = ap.parse_args()
    quiet_threads()
    record = tune(args)
    print(json.dumps({"tune": record["tune"], "check": record["check"]}, indent=1))


if __name__ == "__main__":
    main()
