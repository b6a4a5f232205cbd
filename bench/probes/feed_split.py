"""How much a prompt's next-token logits move with the way the prompt is fed: whole, in two
halves, its last two tokens apart, or its last token alone (a step of one new token, as after
a reused prefix that leaves one token to feed). Plain og.Generator, nothing of the server's:
``python -m bench.probes.feed_split MODEL_DIR``. Why the server never feeds a prompt token alone
(backends/engine/prefix_cache.py ``MIN_FEED``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from backends.models.folder import inspect_model_folder

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle. " * 2


def logits(og: object, model: object, chunks: list[list[int]], length: int) -> np.ndarray:
    params = og.GeneratorParams(model)  # type: ignore[attr-defined]
    # ``length`` at least a sliding window's width: its attention op refuses a shorter cache
    params.set_search_options(max_length=length + 4, do_sample=False)
    gen = og.Generator(model, params)  # type: ignore[attr-defined]
    for chunk in chunks:
        gen.append_tokens(np.asarray(chunk, dtype=np.int32))
    return np.asarray(gen.get_logits(), dtype=np.float64).reshape(-1)


def main(folder: Path) -> None:
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokenizer = og.Tokenizer(model)
    messages = json.dumps([{"role": "user", "content": PROMPT}])
    ids = [
        int(t)
        for t in tokenizer.encode(
            tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        )
    ]
    n = len(ids)
    room = inspect_model_folder(folder).kv_capacity(n)
    whole = logits(og, model, [ids], room)
    print(f"{folder}: {n} prompt tokens; logits std {whole.std():.3f}")
    splits = {
        "two halves": [ids[: n // 2], ids[n // 2 :]],
        "last two apart": [ids[:-2], ids[-2:]],
        "last one alone": [ids[:-1], ids[-1:]],
        "last three one by one": [ids[:-3], ids[-3:-2], ids[-2:-1], ids[-1:]],
    }
    for name, chunks in splits.items():
        other = logits(og, model, chunks, room)
        same = int(np.argmax(other)) == int(np.argmax(whole))
        print(f"  {name:22s} max |diff| {np.abs(other - whole).max():.3g}  same argmax: {same}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
