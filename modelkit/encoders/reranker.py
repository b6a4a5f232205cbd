"""Build a tiny cross-encoder reranker offline: a random-init BertForSequenceClassification
with one label (2 layers, hidden 32) and a locally trained WordPiece tokenizer, in the layout of
an Optimum text-classification export (the Hugging Face files at the top, onnx/model.onnx with
inputs input_ids, attention_mask, token_type_ids and output ``logits`` [batch, 1]).

``expected.json`` records the Hugging Face logits of (query, document) pairs, tokenized as a
pair ([CLS] query [SEP] document [SEP]).

Build-time dependencies: torch==2.13.0, transformers.

    python -m modelkit.encoders.reranker --out tests/hub_models/reranker
    python -m modelkit.encoders.reranker --out tests/hub_models/reranker --check
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelkit.encoders import common
from modelkit.encoders.common import DIGITS, SENTENCES, export_onnx, wordpiece_tokenizer
from modelkit.expected import write_expected

MAX_LENGTH = 64
QUERY = "what is the capital of france?"


def record(model: Any, tokenizer: Any) -> dict[str, Any]:
    import torch

    batch = tokenizer([QUERY] * len(SENTENCES), SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits[:, 0]
    tokens = [len(tokenizer(QUERY, d)["input_ids"]) for d in SENTENCES]
    return {
        "query": QUERY,
        "documents": SENTENCES,
        "pair_tokens": tokens,
        "logits": [float(x) for x in logits],
    }


def build(out: Path) -> None:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(1)
    out.mkdir(parents=True, exist_ok=True)
    wordpiece_tokenizer(vocab_size=512, max_length=MAX_LENGTH, out_dir=out)
    cfg = BertConfig(
        vocab_size=512,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.5,  # logits of a few units, not ~0: a meaningful oracle
    )
    BertForSequenceClassification(cfg).save_pretrained(out)
    # The saved weights, reloaded, are the ones the export and the record must use.
    model = BertForSequenceClassification.from_pretrained(out).eval()
    export_onnx(
        model,
        ["input_ids", "attention_mask", "token_type_ids"],
        "logits",
        out / "onnx" / "model.onnx",
        512,
    )
    write_expected(out, record(model, AutoTokenizer.from_pretrained(out)), DIGITS)


def record_of(out: Path) -> dict[str, Any]:
    from transformers import AutoTokenizer, BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(out).eval()
    return record(model, AutoTokenizer.from_pretrained(out))


def main() -> None:
    common.main(__doc__, lambda args: build(args.out), record_of)


if __name__ == "__main__":
    main()
