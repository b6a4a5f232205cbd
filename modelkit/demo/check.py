"""The demo model's check: the exported folder, through og.Generator, on held-out prompts.

Chat and agent turns greedy (do they end, are their calls parseable and exactly right), and the
plain prompts of ``PLAIN_PROMPTS`` with no template, greedy and sampled with seeds (does the
model continue them). ``modelkit.decoder`` runs it after a training run and writes the
result into ``training.json``; ``python -m modelkit.demo.check FOLDER`` runs it on any folder.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from modelkit.demo.agent_corpus import agent_corpus
from modelkit.demo.plain_corpus import PLAIN_PROMPTS
from modelkit.demo.template import DEMO_TEMPLATE, renderer
from modelkit.demo.train import HELD_OUT_SEED_OFFSET, held_out

LONG_CHECK_LINES = (150, 1500)  # the check's agent prompts: about 2,000 to 17,000 tokens
EOS = 2  # <|im_end|>, the demo model's only end token
PLAIN_SEEDS = (1, 2, 3)  # the sampled runs of each plain prompt (temperature 1)
PLAIN_ROOM = 32  # new tokens a plain prompt is given
PLAIN_ENOUGH = 8  # a plain prompt is continued when at least this many come before the end


def check(folder: Path, template: str, seed: int, n: int = 200, long: int = 12) -> dict[str, Any]:
    """The exported model, greedy through og.Generator, on held-out turns: ``n`` of the chat
    corpus and ``long`` agent turns with long system prompts (thousands of tokens, at their real
    positions). How many replies end with the end-of-turn token; of the turns that ask for a
    tool, how many replies are a parseable call, name the expected tool, and are exactly the
    expected call. Then the plain prompts (:func:`plain`)."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    rng = random.Random(seed + HELD_OUT_SEED_OFFSET)
    agent = [
        agent_corpus(renderer(template), 1, rng.randrange(1 << 30), LONG_CHECK_LINES)[0]
        for _ in range(long)
    ]
    window = _window(folder)
    return {
        **_score(model, held_out(template, seed, n), window),
        "agent_long": _score(model, agent, window),
        "plain": plain(model, window),
    }


def _window(folder: Path) -> int:
    config = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]
    return int((config.get("sliding_window") or {}).get("window_size", 0))


def _generate(
    model: Any, ids: list[int], room: int, window: int, stop_at_room: bool, **search: Any
) -> list[int]:
    """New tokens after ``ids`` until the end token or the sequence's length: ``room`` more
    tokens, or the window if that is longer, unless ``stop_at_room``. (A sliding-window model's
    KV cache must hold at least its window.)"""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=max(len(ids) + room, window), **search)
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    out: list[int] = []
    while not gen.is_done() and not (stop_at_room and len(out) == room):
        gen.generate_next_token()
        out.append(int(gen.get_next_tokens()[0]))
    return out


def plain(model: Any, window: int = 0) -> dict[str, Any]:
    """Each plain prompt as raw text (no template), greedy and sampled at temperature 1 with
    each of ``PLAIN_SEEDS``: how many runs write at least ``PLAIN_ENOUGH`` tokens before the
    end token, and the fewest tokens any run wrote (of ``PLAIN_ROOM`` at most)."""
    import onnxruntime_genai as og

    tok = og.Tokenizer(model)
    greedy, sampled = [], []
    for prompt in PLAIN_PROMPTS:
        ids = list(tok.encode(prompt))
        greedy.append(_written(_generate(model, ids, PLAIN_ROOM, window, True, do_sample=False)))
        for s in PLAIN_SEEDS:
            out = _generate(
                model, ids, PLAIN_ROOM, window, True, do_sample=True, temperature=1.0,
                random_seed=s,
            )  # fmt: skip
            sampled.append(_written(out))
    return {
        "prompts": len(PLAIN_PROMPTS),
        "greedy_continued": sum(n >= PLAIN_ENOUGH for n in greedy),
        "sampled_continued": sum(n >= PLAIN_ENOUGH for n in sampled),
        "sampled_runs": len(sampled),
        "fewest_tokens": min(greedy + sampled),
    }


def _written(out: list[int]) -> int:
    """Tokens written before the end token."""
    return out.index(EOS) if EOS in out else len(out)


def _score(model: Any, pairs: list[tuple[str, str]], window: int = 0) -> dict[str, Any]:
    import onnxruntime_genai as og

    tok = og.Tokenizer(model)
    ended = calls = calls_ok = exact = parsed = named = 0
    lengths = []
    for prompt, want in pairs:
        ids = list(tok.encode(prompt))
        lengths.append(len(ids))
        out = _generate(model, ids, 96, window, False, do_sample=False)
        ended += out[-1] == EOS
        text = tok.decode([t for t in out if t != EOS])
        exact += text + "<|im_end|>" == want
        if want.startswith("<tool_call>"):
            calls += 1
            call, expected = _call(text), _call(want.removesuffix("<|im_end|>"))
            parsed += isinstance(call, dict) and isinstance(call.get("arguments"), dict)
            named += isinstance(call, dict) and call.get("name") == expected["name"]
            calls_ok += call == expected
    return {
        "held_out": len(pairs),
        "prompt_tokens": [min(lengths), max(lengths)],
        "ended": ended,
        "exact": exact,
        "calls": calls,
        "calls_parsed": parsed,
        "calls_named": named,
        "calls_right": calls_ok,
    }


def _call(text: str) -> Any:
    """The JSON object of a ``<tool_call>`` block, or None."""
    inner = text.strip().removeprefix("<tool_call>").removesuffix("</tool_call>")
    try:
        return json.loads(inner)
    except ValueError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("folder", type=Path, help="an exported demo model folder")
    ap.add_argument("--seed", type=int, default=1, help="the build's seed (held-out prompts)")
    args = ap.parse_args()
    print(json.dumps(check(args.folder, DEMO_TEMPLATE, args.seed), indent=1))


if __name__ == "__main__":
    main()
