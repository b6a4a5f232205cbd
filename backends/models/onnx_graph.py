"""The inputs and outputs of an ONNX graph (names, element types, shapes) and the sizes of its
weights, read straight off the file's protobuf encoding.

The server needs only this much of a graph to infer a genai_config.json (and to count a
model's parameters for listings), so it reads it here
rather than depending on the ``onnx`` package (a build-time tool). The file is memory-mapped
and walked field by field: the weights embedded in a model file (initializers, often most of
its bytes) are skipped by their length, never read.

ModelProto field 7 is the graph; GraphProto fields 11 and 12 are its inputs and outputs
(ValueInfoProto: 1 name, 2 type); TypeProto 1 is a tensor type (1 element type, 2 shape);
TensorShapeProto 1 is a dimension (1 value or 2 symbolic name).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# ONNX TensorProto.DataType values -> onnxruntime's names for them.
ELEMENT_TYPES = {
    1: "float",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "double",
    12: "uint32",
    13: "uint64",
    16: "bfloat16",
}

Dim = int | str | None  # a fixed size, a symbolic name, or unknown


class GraphReadError(ValueError):
    """The file is not a readable ONNX model."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # "float", "int64", ... ("unknown" for a non-tensor or unlisted type)
    shape: tuple[Dim, ...] | None  # None: no shape recorded


@dataclass(frozen=True)
class GraphIO:
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]

    def input(self, name: str) -> TensorInfo | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> TensorInfo | None:
        return next((t for t in self.outputs if t.name == name), None)


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise GraphReadError("truncated or corrupt protobuf varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value): an int for varints and fixed-size fields, a view for
    length-delimited ones (no copy)."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise GraphReadError("truncated protobuf field")
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:  # groups (3, 4) are not used by ONNX
            raise GraphReadError(f"unexpected protobuf wire type {wire}")
        if pos > end:
            raise GraphReadError("truncated protobuf field")
        yield number, wire, value


def _text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise GraphReadError("expected a string field")
    return bytes(value).decode("utf-8", errors="replace")


def _dim(buf: memoryview) -> Dim:
    for number, _, value in _fields(buf):
        if number == 1 and isinstance(value, int):
            return value
        if number == 2:
            return _text(value)
    return None


def _tensor_type(buf: memoryview) -> tuple[str, tuple[Dim, ...] | None]:
    dtype, shape = "unknown", None
    for number, _, value in _fields(buf):
        if number == 1 and isinstance(value, int):
            dtype = ELEMENT_TYPES.get(value, f"type {value}")
        elif number == 2 and isinstance(value, memoryview):
            shape = tuple(
                _dim(v) for n, _, v in _fields(value) if n == 1 and not isinstance(v, int)
            )
    return dtype, shape


def _value_info(buf: memoryview) -> TensorInfo:
    name, dtype, shape = "", "unknown", None
    for number, _, value in _fields(buf):
        if number == 1:
            name = _text(value)
        elif number == 2 and isinstance(value, memoryview):
            for n, _, v in _fields(value):
                if n == 1 and isinstance(v, memoryview):  # tensor_type
                    dtype, shape = _tensor_type(v)
    return TensorInfo(name, dtype, shape)


def parse_graph_io(data: bytes | memoryview) -> GraphIO:
    """The graph inputs and outputs of a serialized ModelProto. Inputs that are also
    initializers (constants, in models of IR version < 4) are not model inputs and are left out."""
    buf = memoryview(data)
    graph: memoryview | None = None
    for number, _, value in _fields(buf):
        if number == 7 and isinstance(value, memoryview):
            graph = value
    if graph is None:
        raise GraphReadError("no graph in the file (is it an ONNX model?)")
    inputs: list[TensorInfo] = []
    outputs: list[TensorInfo] = []
    constants: set[str] = set()
    for number, _, value in _fields(graph):
        if not isinstance(value, memoryview):
            continue
        if number == 11:
            inputs.append(_value_info(value))
        elif number == 12:
            outputs.append(_value_info(value))
        elif number == 5:  # initializer (TensorProto): only its name, field 8
            for n, _, v in _fields(value):
                if n == 8:
                    constants.add(_text(v))
                    break
    if not outputs:
        raise GraphReadError("the graph has no outputs (is it an ONNX model?)")
    return GraphIO(tuple(t for t in inputs if t.name not in constants), tuple(outputs))


@dataclass(frozen=True)
class Initializer:
    """A weight of the graph: its name, element type and how many elements it holds."""

    name: str
    dtype: str
    elements: int


def _initializer(buf: memoryview) -> Initializer:
    name, dtype, elements = "", "unknown", 1
    for number, _wire, value in _fields(buf):
        if number == 1:  # dims: packed (wire 2) or one varint each
            if isinstance(value, memoryview):
                pos = 0
                while pos < len(value):
                    dim, pos = _varint(value, pos)
                    elements *= dim
            else:
                elements *= value
        elif number == 2 and isinstance(value, int):
            dtype = ELEMENT_TYPES.get(value, f"type {value}")
        elif number == 8:
            name = _text(value)
    return Initializer(name, dtype, elements)


def parse_initializers(data: bytes | memoryview) -> list[Initializer]:
    """The initializers (weights) of a serialized ModelProto: names, types and sizes only;
    their data, embedded or external, is not read."""
    buf = memoryview(data)
    found: list[Initializer] = []
    for number, _, value in _fields(buf):
        if number == 7 and isinstance(value, memoryview):
            found += [
                _initializer(v)
                for n, _, v in _fields(value)
                if n == 5 and isinstance(v, memoryview)
            ]
    return found


def _read(path: Path, parse: Callable[[memoryview], T]) -> T:
    """``parse`` over the memory-mapped file (its weights are read only if ``parse`` does)."""
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, 2) == 0:
                raise GraphReadError("the file is empty")
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise GraphReadError(f"cannot read it: {exc.strerror or exc}") from None
    error = "unreadable"
    try:
        view = memoryview(mapped)
        try:
            return parse(view)
        except (GraphReadError, ValueError, IndexError) as exc:
            error = str(exc)  # raised below, once no view of the map is left
        finally:
            view.release()
    finally:
        mapped.close()
    raise GraphReadError(error)


def read_graph_io(path: Path) -> GraphIO:
    """:func:`parse_graph_io` of a model file, memory-mapped (its weights are not read)."""
    return _read(path, parse_graph_io)


def read_initializers(path: Path) -> list[Initializer]:
    """:func:`parse_initializers` of a model file, memory-mapped."""
    return _read(path, parse_initializers)
