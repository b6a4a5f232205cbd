"""Build a tiny decoder-based embedder offline, shaped like Qwen3-Embedding: a random-init
Qwen3Model (2 layers, hidden 32, 2 heads, 1 KV head) with a locally trained byte-level BPE
whose post-processor appends <|endoftext|>, saved the way sentence-transformers saves it
(Transformer, Pooling ``lasttoken``, Normalize; a named "query" instruction prompt) plus the
ONNX graph at onnx/model.onnx (input_ids, attention_mask -> last_hidden_state).

``expected.json`` records ``SentenceTransformer.encode`` on fixed texts, plain and with the
"query" prompt.

Build-time dependencies: torch==2.13.0, transformers, sentence-transformers.

    python -m modelkit.encoders.decoder_embedder --out tests/hub_models/decoder-embedder
    python -m modelkit.encoders.decoder_embedder --out tests/hub_models/decoder-embedder --check
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from modelkit.encoders import common
from modelkit.encoders.common import DIGITS, SENTENCES, bpe_tokenizer, export_onnx
from modelkit.expected import write_expected

MAX_LENGTH = 64
PROMPTS = {"query": "Instruct: Given a question, retrieve passages that answer it\nQuery: "}


def record(model: Any) -> dict[str, Any]:
    def enc(texts: list[str], **kw: Any) -> list[list[float]]:
        return [[float(x) for x in row] for row in model.encode(texts, batch_size=4, **kw)]

    return {
        "sentences": SENTENCES,
        "prompt_tokens": [len(model.tokenizer(t)["input_ids"]) for t in SENTENCES],
        "embeddings": enc(SENTENCES),
        "query_embeddings": enc(SENTENCES, prompt_name="query"),
    }


def build(out: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import Qwen3Config, Qwen3Model

    torch.manual_seed(2)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp)
        bpe_tokenizer(vocab_size=512, max_length=MAX_LENGTH, out_dir=hf)
        cfg = Qwen3Config(
            vocab_size=512,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            max_position_embeddings=256,
            tie_word_embeddings=True,
        )
        Qwen3Model(cfg).save_pretrained(hf)
        transformer = models.Transformer(
            str(hf), max_seq_length=MAX_LENGTH, model_kwargs={"attn_implementation": "eager"}
        )
        pooling = models.Pooling(32, pooling_mode="lasttoken")
        model = SentenceTransformer(
            modules=[transformer, pooling, models.Normalize()], prompts=PROMPTS, device="cpu"
        )
        model.save(str(out))
    (out / "README.md").unlink()  # sentence-transformers' generated model card
    export_onnx(
        model[0].auto_model,
        ["input_ids", "attention_mask"],
        "last_hidden_state",
        out / "onnx" / "model.onnx",
        512,
    )
    write_expected(out, record(model), DIGITS)


def record_of(out: Path) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    return record(SentenceTransformer(str(out), device="cpu"))


def main() -> None:
    common.main(__doc__, lambda args: build(args.out), record_of)


if __name__ == "__main__":
    main()
