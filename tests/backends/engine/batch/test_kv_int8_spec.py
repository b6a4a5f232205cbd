"""An int8 KV cache in the batch engine's bookkeeping: the spec reads the type off the graph's
inputs, a token takes a quarter of fp32's bytes (so a budget holds four times the tokens), the
buffers are int8, and what the prefix store reads out of a row comes back byte for byte."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backends.engine.batch.decoder import UnsupportedModel, read_spec
from backends.engine.batch.kv_cache import KVCache, capacity_for
from backends.models.folder import ModelFolder

pytestmark = pytest.mark.unit

LAYERS, KV_HEADS, HEAD = 2, 2, 16
ORT = types.SimpleNamespace(OrtValue=types.SimpleNamespace(ortvalue_from_numpy=lambda a: a))


def folder(shared: bool) -> ModelFolder:
    decoder = {
        "filename": "model.onnx",
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "head_size": HEAD,
        "inputs": {
            "past_key_names": "past_key_values.%d.key",
            "past_value_names": "past_key_values.%d.value",
        },
        "outputs": {
            "present_key_names": "present.%d.key",
            "present_value_names": "present.%d.value",
        },
    }
    config: dict[str, Any] = {
        "model": {"decoder": decoder, "vocab_size": 1024},
        "search": {"past_present_share_buffer": shared},
    }
    return ModelFolder(Path("/nonexistent"), config)


def inputs(kv_type: str) -> dict[str, str]:
    kv = {
        f"past_key_values.{i}.{kind}": kv_type for i in range(LAYERS) for kind in ("key", "value")
    }
    return {"input_ids": "tensor(int64)", "attention_mask": "tensor(int64)", **kv}


def test_an_int8_cache_takes_a_quarter_of_fp32s_bytes_a_token() -> None:
    fp32 = read_spec(folder(True), inputs("tensor(float)"))
    int8 = read_spec(folder(True), inputs("tensor(int8)"))
    assert int8.kv_dtype == np.int8
    assert int8.bytes_per_token == 2 * LAYERS * KV_HEADS * HEAD == fp32.bytes_per_token // 4
    assert capacity_for(int8, 4, 1 << 20, budget_mib=1.0) == 4 * capacity_for(
        fp32, 4, 1 << 20, budget_mib=1.0
    )


def test_the_builders_unshared_int8_folder_is_served_but_not_an_unshared_float_one() -> None:
    # The builder marks a CPU int8 model unshared; onnxruntime shares whenever past and
    # present are one buffer, which is how the engine binds them.
    assert read_spec(folder(False), inputs("tensor(int8)")).kv_dtype == np.int8
    with pytest.raises(UnsupportedModel, match="not shared"):
        read_spec(folder(False), inputs("tensor(float)"))


def test_a_packed_int4_cache_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedModel, match=r"tensor\(uint8\) is not supported"):
        read_spec(folder(True), inputs("tensor(uint8)"))


def test_int8_rows_are_read_and_written_back_byte_for_byte() -> None:
    spec = read_spec(folder(True), inputs("tensor(int8)"))
    cache = KVCache(spec, slots=3, capacity=64, ort=ORT)
    assert all(b.dtype == np.int8 for b in (*cache.keys, *cache.values))
    assert cache.nbytes == 3 * 64 * spec.bytes_per_token
    rng = np.random.default_rng(0)
    for buffer in (*cache.keys, *cache.values):
        buffer[...] = rng.integers(-128, 128, buffer.shape, dtype=np.int8)
    block = cache.read(0, 8, 40)
    assert block.dtype == np.int8 and block.nbytes == 32 * spec.bytes_per_token
    cache.write(2, 8, block)
    cache.copy(0, 1, 0, 8)
    for buffer in (*cache.keys, *cache.values):
        assert np.array_equal(buffer[2, :, 8:40], buffer[0, :, 8:40])
        assert np.array_equal(buffer[1, :, :8], buffer[0, :, :8])
