"""The demo model's ONNX weights as llama.cpp's GGUF: the rotary base read off the cos/sin
caches, the q/k row order llama.cpp's rotary expects, and (with ``onnx`` and ``gguf``
installed: requirements-bench.txt) a written file's tensors and metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.peers.onnx_gguf import permute
from config.settings import REPO_ROOT
from modelkit.onnx_weights import rope_base

pytestmark = pytest.mark.unit


def test_the_rotary_base_is_read_off_the_caches() -> None:
    pairs, base = 16, 10_000.0
    inv = base ** (-np.arange(pairs) * 2 / (2 * pairs))
    angles = np.arange(8)[:, None] * inv[None, :]
    assert rope_base(np.cos(angles), np.sin(angles), 2 * pairs) == pytest.approx(base)


def test_rows_go_from_rotary_halves_to_interleaved_pairs_per_head() -> None:
    # one head of 4 dimensions: Hugging Face rotates (0, 2) and (1, 3); llama.cpp (0, 1), (2, 3)
    rows = np.arange(8).reshape(8, 1)  # two heads
    assert permute(rows, 2).ravel().tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_the_demo_model_becomes_a_llama_gguf(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf", reason="gguf is a benchmark package")
    pytest.importorskip("onnx", reason="onnx is a build package")
    from bench.peers.onnx_gguf import write_gguf

    out = write_gguf(REPO_ROOT / "tests" / "models" / "demo-fp32", tmp_path / "demo.gguf")
    reader = gguf.GGUFReader(str(out))
    shapes = {t.name: tuple(int(x) for x in t.shape) for t in reader.tensors}
    assert shapes["token_embd.weight"] == (256, 1024)  # ggml's order: [in, out]
    assert shapes["blk.1.attn_q.weight"] == (256, 256)
    assert shapes["blk.1.attn_k.weight"] == shapes["blk.1.attn_v.weight"] == (256, 64)
    assert shapes["output.weight"] == (256, 1024) and len(shapes) == 2 + 1 + 2 * 9
    fields = reader.fields
    assert fields["llama.attention.head_count_kv"].parts[-1][0] == 2
    assert bytes(fields["tokenizer.ggml.model"].parts[-1]).decode() == "gpt2"
