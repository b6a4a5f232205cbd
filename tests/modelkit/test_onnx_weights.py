"""A builder-made folder's weights read back as Hugging Face's Llama: the rotary base and its
refusal of a scaled rotary (everywhere), and (with ``onnx``, ``torch`` and ``transformers``:
requirements-build.txt) the demo model's int4 weights as its fp32 copy's, the model they make
computing the fp32 ONNX graph's logits, and the decoders that are no Llama refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from config.settings import REPO_ROOT
from modelkit.onnx_weights import rope_theta

pytestmark = pytest.mark.unit

DEMO = REPO_ROOT / "models" / "demo-llama"
DEMO_FP32 = REPO_ROOT / "tests" / "models" / "demo-fp32"
MODELS = REPO_ROOT / "tests" / "models"


def caches(base: float, pairs: int = 16, scale: np.ndarray | None = None) -> tuple[Any, Any]:
    inv = base ** (-np.arange(pairs) / pairs)
    if scale is not None:
        inv = inv * scale
    angles = np.arange(512)[:, None] * inv[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@pytest.mark.parametrize("base", [10_000.0, 500_000.0, 1_000_000.0, 12_345.678])
def test_the_rotary_base_is_read_off_the_caches(base: float) -> None:
    assert rope_theta(*caches(base)) == pytest.approx(base, rel=1e-4)


def test_a_scaled_rotary_is_refused() -> None:
    # Llama 3's scaling: the low frequencies (the last pairs) slowed down
    scale = np.where(np.arange(16) >= 12, 1 / 8, 1.0)
    with pytest.raises(SystemExit, match="scaled rotary"):
        rope_theta(*caches(500_000.0, scale=scale))


def needs(*packages: str) -> None:
    for package in packages:
        pytest.importorskip(package, reason=f"{package} is a build package")


def test_the_int4_weights_are_the_fp32_copys() -> None:
    needs("onnx")
    from modelkit.onnx_weights import read_decoder

    shape, int4 = read_decoder(DEMO)
    fp32_shape, fp32 = read_decoder(DEMO_FP32)
    assert shape | {"max_position_embeddings": 0} == fp32_shape | {"max_position_embeddings": 0}
    assert shape["tie_word_embeddings"] and "lm_head.weight" not in int4
    assert (shape["hidden_size"], shape["intermediate_size"], shape["head_dim"]) == (256, 512, 32)
    assert shape["rope_theta"] == 10_000.0 and shape["rms_norm_eps"] == pytest.approx(1e-5)
    assert sorted(int4) == sorted(fp32) and len(int4) == 1 + 1 + 2 * 9
    for name, w in int4.items():
        assert np.array_equal(w, fp32[name]), name
    assert int4["model.layers.1.self_attn.k_proj.weight"].shape == (64, 256)  # [out, in]


def test_the_weights_make_the_graphs_model() -> None:
    needs("onnx", "torch", "transformers")
    import onnxruntime as ort
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from modelkit.onnx_weights import read_decoder

    shape, weights = read_decoder(DEMO)
    model = LlamaForCausalLM(LlamaConfig(**shape)).eval()
    missing, unexpected = model.load_state_dict(
        {k: torch.from_numpy(w) for k, w in weights.items()}, strict=False
    )
    assert missing == ["lm_head.weight"] and not unexpected  # tied
    model.tie_weights()
    ids = np.array([[0, 1, 55, 300, 77, 900, 12, 5, 400, 401, 402, 3, 77, 900]], dtype=np.int64)
    session = ort.InferenceSession(str(DEMO_FP32 / "model.onnx"))
    feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    for i in session.get_inputs():
        if i.name.startswith("past"):  # the window's cache, empty
            feeds[i.name] = np.zeros((1, 2, 512, 32), dtype=np.float32)
    expected = session.run(["logits"], feeds)[0]
    with torch.no_grad():
        got = model(torch.from_numpy(ids)).logits.numpy()
    assert np.abs(got - expected).max() < 1e-3
    assert (got.argmax(-1) == expected.argmax(-1)).all()


@pytest.mark.parametrize(
    ("folder", "named"),
    [
        ("qwen2", "qkv_proj/Add"),  # biases
        ("gemma", "embed_tokens/Mul"),  # a scaled embedding
        ("qwen3", "Split"),  # q and k norms
    ],
)
def test_decoders_that_are_no_llama_are_refused(folder: str, named: str) -> None:
    needs("onnx")
    from modelkit.onnx_weights import read_decoder

    with pytest.raises(SystemExit, match=named):
        read_decoder(MODELS / folder)


def test_a_weight_nothing_reads_is_refused(tmp_path: Path) -> None:
    needs("onnx")
    import shutil

    import onnx
    from onnx import numpy_helper

    from modelkit.onnx_weights import read_decoder

    folder = tmp_path / "demo"
    shutil.copytree(DEMO_FP32, folder)
    model = onnx.load(str(folder / "model.onnx"))
    extra = np.ones(256, dtype=np.float32)
    model.graph.initializer.append(numpy_helper.from_array(extra, "model.layers.0.q_norm.weight"))
    onnx.save(model, str(folder / "model.onnx"), save_as_external_data=True, location="w.data")
    with pytest.raises(SystemExit, match="q_norm"):
        read_decoder(folder)
