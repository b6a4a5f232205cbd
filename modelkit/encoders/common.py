"""What the three encoder builds share: a locally trained tokenizer, a torch.onnx
export of a Hugging Face model, and the command line with its check of expected.json.

Build-time only (torch, transformers, sentence-transformers): see modelkit/encoders/embedder.py.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from modelkit import cli
from modelkit.expected import compare, read_expected, report
from modelkit.tokenizer import byte_level_bpe

SEED = 0
DIGITS = 7  # expected.json keeps the floats to this many decimals

_WORDS = (
    "the a an of to in on at for with from by about river city mountain sea sky sun moon star "
    "tree house road car train ship bird fish dog cat apple bread water fire stone light dark "
    "day night morning evening summer winter music book story paper write read speak listen "
    "think know learn teach build run walk open close start stop begin end search query answer "
    "passage document model server vector embedding rank score question capital france paris "
    "berlin germany weather rain snow cold warm fast slow big small red green blue"
).split()

# Texts the oracles are recorded on (with and without the named prompts).
SENTENCES = [
    "The river runs to the city",
    "what is the capital of france?",
    "Paris is the capital of France.",
    "a dog and a cat sit in the warm sun",
    "1 + 2 = 3",
    "Berlin is in Germany, where the weather is cold in winter.",
]


def corpus(lines: int = 3000) -> list[str]:
    rng = random.Random(SEED)
    out = []
    for _ in range(lines):
        n = rng.randint(4, 16)
        out.append(" ".join(rng.choice(_WORDS) for _ in range(n)).capitalize() + ".")
    out += [f"{i} + {i + 1} = {2 * i + 1}" for i in range(100)]
    return out + SENTENCES


def wordpiece_tokenizer(vocab_size: int, max_length: int, out_dir: Path) -> None:
    """A BERT-style uncased WordPiece tokenizer with [CLS] a [SEP] (b [SEP]) templates."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import BertTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=special, show_progress=False
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    fast = BertTokenizerFast(tokenizer_object=tok, model_max_length=max_length, do_lower_case=True)
    fast.save_pretrained(out_dir)


def bpe_tokenizer(vocab_size: int, max_length: int, out_dir: Path) -> None:
    """A byte-level BPE (Qwen-like) whose post-processor appends <|endoftext|>, as
    Qwen3-Embedding's tokenizer does: the last token, which last-token pooling reads."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    eos = "<|endoftext|>"
    tok = byte_level_bpe(corpus(), vocab_size, [eos], byte_level_post=False)
    eos_id = tok.token_to_id(eos)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"$A {eos}", pair=f"$A {eos} $B:1 {eos}:1", special_tokens=[(eos, eos_id)]
            ),
        ]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos,
        pad_token=eos,
        model_max_length=max_length,
        padding_side="right",
    )
    fast.save_pretrained(out_dir)


def export_onnx(model: Any, inputs: list[str], output: str, path: Path, vocab: int) -> None:
    """torch.onnx (TorchScript exporter, opset 17) with dynamic batch and sequence axes, the
    graph Optimum's feature-extraction / text-classification export has."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    model.eval()
    ids = torch.randint(5, vocab, (2, 7))
    feeds = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if "token_type_ids" in inputs:
        feeds["token_type_ids"] = torch.zeros_like(ids)

    class Wrapped(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args: Any) -> Any:
            kwargs = dict(zip(inputs, args, strict=True))
            out = self.inner(**kwargs)
            return out[0]

    axes = {name: {0: "batch_size", 1: "sequence_length"} for name in inputs}
    axes[output] = {0: "batch_size"} | ({1: "sequence_length"} if output != "logits" else {})
    with torch.no_grad():
        torch.onnx.export(
            Wrapped(),
            tuple(feeds[n] for n in inputs),
            str(path),
            input_names=inputs,
            output_names=[output],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    model.eval()  # the exporter restores the wrapper's (training) mode on the model


def check(out: Path, record_of: Callable[[Path], dict[str, Any]]) -> int:
    """``expected.json`` in ``out`` re-derived by ``record_of`` (from the weights there)."""
    return report(compare(read_expected(out), record_of(out)))


def main(
    doc: str | None,
    build: Callable[[argparse.Namespace], None],
    record_of: Callable[[Path], dict[str, Any]],
    shapes: Sequence[str] = (),
) -> None:
    """An encoder build's command line: ``--out`` (and ``--shape`` where there are several),
    or ``--check``."""
    ap = cli.parser(doc, "re-derive expected.json")
    if shapes:
        ap.add_argument("--shape", choices=sorted(shapes), default=shapes[0])
    args = ap.parse_args()
    cli.build_or_check(args, lambda: build(args), lambda out: check(out, record_of))
