"""Reading an encoder folder: kind, pooling, normalisation, length and prompts, from the
sentence-transformers files (both generations of them), an Optimum export, or the models file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from backends.config import ModelConfig
from backends.errors import StartupError
from backends.models.encoder import detect_kind, read_encoder, serves_encoder
from config.settings import DEMO_MODEL_DIR, REPO_ROOT

pytestmark = pytest.mark.unit

HUB = REPO_ROOT / "tests" / "hub_models"


def copy(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(HUB / name, tmp_path / name))


def test_the_committed_models_read_as_built() -> None:
    st = read_encoder(HUB / "st-embedder")
    assert (st.kind, st.pooling, st.normalize, st.max_length) == ("embedding", "mean", True, 64)
    assert st.prompts == {"query": "query: ", "document": "passage: "}
    assert st.output == "last_hidden_state" and st.pad_id == 0 and st.vocab_size == 512
    qwen = read_encoder(HUB / "decoder-embedder")
    assert (qwen.kind, qwen.pooling, qwen.normalize) == ("embedding", "last", True)
    assert qwen.pad_id == 0  # <|endoftext|>, the tokenizer's pad token
    rerank = read_encoder(HUB / "reranker")
    assert (rerank.kind, rerank.output) == ("reranker", "logits")


def test_generators_are_not_encoders() -> None:
    assert detect_kind(DEMO_MODEL_DIR) is None
    assert detect_kind(HUB / "optimum-llama") is None  # ForCausalLM
    assert not serves_encoder(ModelConfig(DEMO_MODEL_DIR))
    assert serves_encoder(ModelConfig(HUB / "reranker"))
    assert not serves_encoder(ModelConfig(HUB / "reranker", kind="generator"))
    with pytest.raises(StartupError, match="no embedding or reranker"):
        read_encoder(DEMO_MODEL_DIR)


def test_older_sentence_transformers_files(tmp_path: Path) -> None:
    folder = copy("st-embedder", tmp_path)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_cls_token": True,
                "pooling_mode_mean_tokens": False,
                "pooling_mode_max_tokens": False,
                "pooling_mode_lasttoken": False,
            }
        )
    )
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 48}')
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps(modules[:2]))  # no Normalize
    spec = read_encoder(folder)
    assert (spec.pooling, spec.normalize, spec.max_length) == ("cls", False, 48)


def test_max_pooling_is_refused_by_name(tmp_path: Path) -> None:
    folder = copy("st-embedder", tmp_path)
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode": "max"}')
    with pytest.raises(StartupError, match="max"):
        read_encoder(folder)


def test_an_optimum_export_reads_from_config_and_graph(tmp_path: Path) -> None:
    folder = copy("st-embedder", tmp_path)
    for name in ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json"):
        (folder / name).unlink()
    shutil.rmtree(folder / "1_Pooling")
    assert detect_kind(folder) == "embedding"
    spec = read_encoder(folder)
    assert (spec.pooling, spec.normalize, spec.max_length, spec.prompts) == ("mean", True, 64, {})


def test_the_models_file_overrides_the_folder() -> None:
    spec = read_encoder(HUB / "st-embedder", pooling="cls", normalize=False, max_length=32)
    assert (spec.pooling, spec.normalize, spec.max_length) == ("cls", False, 32)


def test_missing_pieces_are_named(tmp_path: Path) -> None:
    folder = copy("reranker", tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(StartupError, match="tokenizer.json"):
        read_encoder(folder)
    with pytest.raises(StartupError, match="nope.onnx"):
        read_encoder(HUB / "reranker", variant="nope.onnx")
    with pytest.raises(StartupError, match="logits"):
        read_encoder(HUB / "st-embedder", kind="reranker")
