"""The ONNX graph reader: inputs and outputs of real exports, read without the onnx package."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from backends.models.onnx_graph import GraphReadError, TensorInfo, parse_graph_io, read_graph_io
from config.settings import REPO_ROOT

pytestmark = pytest.mark.unit

OPTIMUM = REPO_ROOT / "tests" / "hub_models" / "optimum-llama" / "onnx" / "model.onnx"


def test_builder_graph(demo_model_dir: Path) -> None:
    graph = read_graph_io(demo_model_dir / "model.onnx")
    assert [t.name for t in graph.inputs][:2] == ["input_ids", "attention_mask"]
    assert graph.input("input_ids") == TensorInfo(
        "input_ids", "int64", ("batch_size", "sequence_length")
    )
    kv = graph.input("past_key_values.1.value")
    assert kv == TensorInfo(  # a sliding-window layer's cache
        "past_key_values.1.value",
        "float",
        ("batch_size", 2, "past_sliding_length", "kv_cache_dim"),
    )
    logits = graph.output("logits")
    assert logits is not None and logits.shape == ("batch_size", "sequence_length", 1024)
    assert len(graph.outputs) == 5


def test_optimum_graph_has_position_ids_and_fixed_kv_dims() -> None:
    graph = read_graph_io(OPTIMUM)
    assert {t.name for t in graph.inputs} == {
        "input_ids",
        "attention_mask",
        "position_ids",
        *(f"past_key_values.{i}.{k}" for i in range(2) for k in ("key", "value")),
    }
    kv = graph.input("past_key_values.0.key")
    assert kv is not None and kv.shape == ("batch_size", 1, "past_sequence_length", 16)
    present = graph.output("present.1.value")
    assert present is not None and present.shape is not None and present.shape[1:2] == (1,)


@pytest.mark.skipif(importlib.util.find_spec("onnx") is None, reason="onnx not installed")
@pytest.mark.parametrize("path", [OPTIMUM, REPO_ROOT / "models" / "demo-llama" / "model.onnx"])
def test_agrees_with_the_onnx_package(path: Path) -> None:
    import onnx

    model = onnx.load(str(path), load_external_data=False)

    def infos(values: list[object]) -> list[tuple[str, list[object]]]:
        return [
            (v.name, [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim])  # type: ignore[attr-defined]
            for v in values
        ]

    graph = read_graph_io(path)
    assert [(t.name, list(t.shape or ())) for t in graph.inputs] == infos(model.graph.input)
    assert [(t.name, list(t.shape or ())) for t in graph.outputs] == infos(model.graph.output)


# A minimal protobuf writer, for hand-made graphs.
def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _value_info(name: str, elem: int, dims: list[int | str]) -> bytes:
    shape = b"".join(
        _field(1, _field(1, d) if isinstance(d, int) else _field(2, d.encode())) for d in dims
    )
    tensor = _field(1, elem) + _field(2, shape)
    return _field(1, name.encode()) + _field(2, _field(1, tensor))


def test_inputs_that_are_initializers_are_not_inputs() -> None:
    # IR version < 4 lists constants among the inputs too.
    weights = _field(8, b"w") + _field(9, b"\x00" * 4096)  # name, raw_data
    graph = (
        _field(5, weights)
        + _field(11, _value_info("input_ids", 7, ["batch", 3]))
        + _field(11, _value_info("w", 1, [1024]))
        + _field(12, _value_info("logits", 10, ["batch", 3, 50]))
    )
    parsed = parse_graph_io(_field(1, 3) + _field(7, graph))
    assert [t.name for t in parsed.inputs] == ["input_ids"]
    assert parsed.outputs == (TensorInfo("logits", "float16", ("batch", 3, 50)),)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty"),
        (b"not a model at all", "protobuf|graph"),
        (OPTIMUM.read_bytes()[:5000], "truncated"),
        (_field(1, 7), "no graph"),
    ],
)
def test_bad_files_raise_a_clear_error(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with pytest.raises(GraphReadError, match=needle):
        read_graph_io(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GraphReadError, match="cannot read"):
        read_graph_io(tmp_path / "absent.onnx")
