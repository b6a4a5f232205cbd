"""The byte-level BPE every model of the kit trains on its own corpus (no hub: each tokenizer
is trained here, deterministically, from generated text)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

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
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        n = rng.randint(4, 16)
        sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
        out.append(sentence.capitalize() + rng.choice([".", "?", "!", ",", ":"]))
    out += [f"{i} + {i + 1} = {2 * i + 1}" for i in range(200)]
    return out


# ChatML's special tokens, in the order that gives them ids 0, 1, 2.
CHATML_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_level_bpe(
    texts: Iterable[str],
    vocab_size: int,
    special: Sequence[str] = (),
    *,
    byte_level_post: bool = True,
) -> Any:
    """A ``tokenizers`` BPE trained on ``texts``: byte-level pre-tokenizer and decoder, no
    prefix space, the byte alphabet always in the vocabulary, ``special`` tokens first. With
    ``byte_level_post``, the ByteLevel post-processor (offsets untrimmed); without, none (the
    caller sets its own)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if byte_level_post:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def save_chatml(tok: Any, template: str, out_dir: Path) -> None:
    """``tok`` as a Hugging Face fast tokenizer with ChatML's tokens (begin and pad
    ``<|endoftext|>``, end ``<|im_end|>``) and ``template`` as its chat template."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    fast.chat_template = template
    fast.save_pretrained(out_dir)


def train_chatml_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    template: str,
    out_dir: Path,
    special: Sequence[str] = CHATML_SPECIAL,
) -> Any:
    """A byte-level BPE on ``texts`` saved in ``out_dir`` with ChatML's tokens and ``template``;
    returns the ``tokenizers`` object."""
    tok = byte_level_bpe(texts, vocab_size, special)
    save_chatml(tok, template, out_dir)
    return tok
