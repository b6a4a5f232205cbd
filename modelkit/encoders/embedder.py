"""Build a tiny sentence-transformers embedding model offline, in the layout
sentence-transformers saves (modules.json, 1_Pooling/, 2_Normalize/, sentence_bert_config.json,
config_sentence_transformers.json with named prompts) plus the ONNX graph at onnx/model.onnx
(inputs input_ids, attention_mask, token_type_ids; output last_hidden_state, as Optimum's
feature-extraction export has it).

A random-init BERT (2 layers, hidden 32) with a locally trained WordPiece tokenizer; mean
pooling, then normalisation; max_seq_length 64. ``expected.json`` records
``SentenceTransformer.encode`` on fixed texts: plain, with the "query" prompt, and a text longer
than 64 tokens truncated (what encode() does silently; the server only on request).

Build-time dependencies (not the server's): torch==2.13.0, transformers, sentence-transformers.

    python -m modelkit.encoders.embedder --out tests/hub_models/st-embedder
    python -m modelkit.encoders.embedder --out tests/hub_models/st-embedder --check
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from modelkit.encoders import common
from modelkit.encoders.common import DIGITS, SENTENCES, export_onnx, wordpiece_tokenizer
from modelkit.expected import write_expected

# tiny: the committed test model. minilm: all-MiniLM-L6-v2's shape (random weights), for the
# benchmark (bench/benchmarks/embed.py), built on demand and never committed.
SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "vocab": 512, "max": 64},
    "minilm": {"layers": 6, "hidden": 384, "heads": 12, "ffn": 1536, "vocab": 8192, "max": 256},
}
PROMPTS = {"query": "query: ", "document": "passage: "}
LONG_TEXT = " ".join(["the river runs to the city and the sea"] * 12)


def record(model: Any) -> dict[str, Any]:
    def enc(texts: list[str], **kw: Any) -> list[list[float]]:
        return [[float(x) for x in row] for row in model.encode(texts, batch_size=4, **kw)]

    tokens = [len(model.tokenizer(t)["input_ids"]) for t in SENTENCES]
    return {
        "sentences": SENTENCES,
        "prompt_tokens": tokens,
        "embeddings": enc(SENTENCES),
        "query_embeddings": enc(SENTENCES, prompt_name="query"),
        "long_text": LONG_TEXT,
        "long_text_tokens": len(model.tokenizer(LONG_TEXT, truncation=False)["input_ids"]),
        "long_truncated_embedding": enc([LONG_TEXT])[0],
    }


def build(out: Path, shape: str = "tiny") -> None:
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    dims = SHAPES[shape]
    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp)
        wordpiece_tokenizer(vocab_size=dims["vocab"], max_length=dims["max"], out_dir=hf)
        cfg = BertConfig(
            vocab_size=len(BertTokenizerFast.from_pretrained(hf)),  # what the corpus gave
            hidden_size=dims["hidden"],
            num_hidden_layers=dims["layers"],
            num_attention_heads=dims["heads"],
            intermediate_size=dims["ffn"],
            max_position_embeddings=max(128, dims["max"]),
        )
        BertModel(cfg).save_pretrained(hf)
        transformer = models.Transformer(str(hf), max_seq_length=dims["max"])
        pooling = models.Pooling(dims["hidden"], pooling_mode="mean")
        model = SentenceTransformer(
            modules=[transformer, pooling, models.Normalize()], prompts=PROMPTS, device="cpu"
        )
        model.save(str(out))
    (out / "README.md").unlink()  # sentence-transformers' generated model card
    bert = model[0].auto_model
    export_onnx(
        bert,
        ["input_ids", "attention_mask", "token_type_ids"],
        "last_hidden_state",
        out / "onnx" / "model.onnx",
        min(512, bert.config.vocab_size),
    )
    write_expected(out, record(model), DIGITS)


def record_of(out: Path) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    return record(SentenceTransformer(str(out), device="cpu"))


def main() -> None:
    common.main(__doc__, lambda args: build(args.out, args.shape), record_of, list(SHAPES))


if __name__ == "__main__":
    main()
