"""The benchmark model's vocabulary at full size: the locally trained BPE, padded.

The byte-level BPE that modelkit/decoder.py trains on its small built-in corpus stops at
~1,200 tokens, so a model built from it has a tiny LM head (the last matmul and the logits
copy of every step), which flatters every engine. Here the trained tokenizer is padded with
filler tokens up to the shape's real vocabulary size (49,152 for SmolLM2), so that
``len(tokenizer) == vocab_size`` and the exported LM head is full size.

A filler token is the text of two tokens of the trained vocabulary, the second a word with a
leading space (``Ġthe`` + ``Ġmodel`` → ``ĠtheĠmodel``): the byte-level pre-tokenizer always
splits such text into two pieces and BPE never merges across pieces, so encoding never
produces a filler; the random-weight model does generate them (most of its vocabulary is
filler) and every tokenizer (onnxruntime-genai, Hugging Face, llama.cpp) decodes one to plain
text (`` the model``), which re-encodes to two ordinary tokens in a later chat turn.

``python -m bench.harness.vocab --shape smollm2-135m --precision int4 --out DIR`` runs
modelkit/decoder.py (same options, defaults and weights) with its tokenizer padded.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.paths import ROOT

FILLER_SEED = 49152


def _fillers(vocab: dict[str, int], special: set[str], needed: int) -> list[str]:
    """``needed`` new token strings that encoding can never produce (see the module doc).

    Each is a trained token that ends in a visible ASCII character followed by a trained
    word token with a leading space (``Ġ``): the GPT-2 pre-tokenizer never keeps a visible
    character and a following space in one piece, so the pair is always split in two.
    """

    def text(t: str) -> str:
        return t.replace("Ġ", " ")

    firsts = sorted(
        t
        for t in vocab
        if t not in special
        and text(t).strip()
        and text(t).isascii()
        and text(t).isprintable()
        and not text(t).endswith(" ")
    )
    words = sorted(t for t in vocab if t.startswith("Ġ") and len(t) > 1 and t[1:].isalpha())
    pairs = [a + b for a in firsts for b in words]
    random.Random(FILLER_SEED).shuffle(pairs)
    seen = set(vocab)
    out: list[str] = []
    for p in pairs:
        if len(out) == needed:
            break
        if p not in seen:
            seen.add(p)
            out.append(p)
    i = 0
    while len(out) < needed:  # a tiny trained vocabulary: numbered fillers
        t = f"<filler{i}>"
        i += 1
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def pad_tokenizer(folder: Path, vocab_size: int) -> int:
    """Add filler tokens to ``folder``/tokenizer.json's BPE vocabulary up to ``vocab_size``
    ids (0 .. vocab_size - 1, no gaps). Returns how many were added."""
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    vocab: dict[str, int] = data["model"]["vocab"]
    used = set(vocab.values()) | {int(t["id"]) for t in data.get("added_tokens", [])}
    if len(used) > vocab_size:
        raise ValueError(f"the trained vocabulary ({len(used)}) exceeds {vocab_size}")
    free = [i for i in range(vocab_size) if i not in used]
    special = {str(t["content"]) for t in data.get("added_tokens", [])}
    for token, idx in zip(_fillers(vocab, special, len(free)), free, strict=True):
        vocab[token] = idx
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return len(free)


def _padded(train: Callable[[int, Path], None]) -> Callable[[int, Path], None]:
    def train_and_pad(vocab_size: int, out_dir: Path) -> None:
        train(vocab_size, out_dir)
        pad_tokenizer(Path(out_dir), vocab_size)

    return train_and_pad


def _saved_as(dtype: str, draw: Callable[[Any, float], None]) -> Callable[[Any, float], None]:
    """modelkit/decoder.py's last step before ``save_pretrained`` (drawing the biases), then
    the model cast to ``dtype``: the same random draws, saved at half the size for fp16."""

    def draw_then_cast(model: Any, init_range: float) -> None:
        import torch

        draw(model, init_range)
        model.to(getattr(torch, dtype))

    return draw_then_cast


def main(argv: list[str]) -> None:
    """modelkit/decoder.py's command line, with the tokenizer padded to full size; then
    checks that the tokenizer, the HF config and the export agree on that size.

    ``--hf-dtype float16`` (ours, not decoder.py's) saves the HF weights as fp16: a 1B
    shape's folder is 2.1 GB instead of 4.3, and the builder reads either."""
    sys.path.insert(0, str(ROOT))
    import modelkit.decoder as build_model

    build_model.train_tokenizer = _padded(build_model.train_tokenizer)  # type: ignore[assignment]
    if "--hf-dtype" in argv:
        i = argv.index("--hf-dtype")
        dtype = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
        if dtype != "float32":
            build_model.draw_biases = _saved_as(dtype, build_model.draw_biases)  # type: ignore[assignment]
    sys.argv = ["build_model.py", *argv]
    build_model.main()
    out = Path(argv[argv.index("--out") + 1])
    shape = argv[argv.index("--shape") + 1]
    if (out / "hf").exists():
        from transformers import AutoTokenizer

        expected = build_model.SHAPES[shape]["vocab_size"]
        sizes = check(out, expected)
        n = len(AutoTokenizer.from_pretrained(out / "hf"))
        if n != expected:
            raise RuntimeError(f"len(AutoTokenizer) = {n}, expected {expected}")
        print(json.dumps({"len(AutoTokenizer)": n, **sizes}))


def check(model_dir: Path, vocab_size: int) -> dict[str, int]:
    """Vocabulary sizes of a built folder (its tokenizer with added tokens, the HF config,
    genai_config.json); raises unless they all equal ``vocab_size``. Reads JSON only."""
    tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    ids = set(tok["model"]["vocab"].values()) | {int(t["id"]) for t in tok.get("added_tokens", [])}
    sizes = {
        "tokenizer ids": len(ids),
        "tokenizer max id + 1": max(ids) + 1,
        "genai_config vocab_size": int(
            json.loads((model_dir / "genai_config.json").read_text())["model"]["vocab_size"]
        ),
    }
    hf = model_dir / "hf" / "config.json"
    if hf.exists():
        sizes["hf config vocab_size"] = int(json.loads(hf.read_text())["vocab_size"])
    if set(sizes.values()) != {vocab_size}:
        raise RuntimeError(f"vocabulary sizes {sizes}, expected {vocab_size}")
    return sizes


if __name__ == "__main__":
    main(sys.argv[1:])
