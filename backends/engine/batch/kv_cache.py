"""The KV cache of the batch engine: one buffer per layer and kind, one row per slot.

``[slots, kv_heads, capacity, head_size]`` numpy buffers, handed to onnxruntime as OrtValues
over the same memory (no copies): rows ``[lo, hi)`` of a buffer are contiguous, so a
sequence's row, or a range of rows for a batch, is bound in place and the attention op
writes the new keys and values straight into it.

The buffers are written once at start. The attention op touches a row's whole capacity the
first time it runs on it; left to the page faults of lazily mapped memory, a first prefill
into a fresh 8,192-token row of the 135M benchmark model took 2.9-5.2 s instead of 0.8-0.9 s
(on a busy 2-core machine).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from backends.engine.batch.decoder import DecoderSpec

MIB = 1024 * 1024


def capacity_for(
    spec: DecoderSpec, slots: int, max_length: int, budget_mib: float | None = None
) -> int:
    """Tokens per slot: the model's max length, or fewer if a KV memory budget says so."""
    if budget_mib is None or not math.isfinite(budget_mib * MIB):
        return max_length  # no budget, or one no memory could hold (floats overflow)
    fits = int(budget_mib * MIB // (slots * spec.bytes_per_token))
    return max(1, min(max_length, fits))


class KVCache:
    def __init__(self, spec: DecoderSpec, slots: int, capacity: int, ort: Any) -> None:
        self.slots = slots
        self.capacity = capacity
        shape = (slots, spec.kv_heads, capacity, spec.head_size)
        self.keys = [np.empty(shape, dtype=spec.kv_dtype) for _ in range(spec.layers)]
        self.values = [np.empty(shape, dtype=spec.kv_dtype) for _ in range(spec.layers)]
        for buffer in (*self.keys, *self.values):
            buffer.fill(0)  # resident now, not page by page during the first requests
        self._ortvalue = ort.OrtValue.ortvalue_from_numpy

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.keys) + sum(b.nbytes for b in self.values)

    def swap(self, a: int, b: int, length_a: int, length_b: int) -> None:
        """Exchange what rows ``a`` and ``b`` hold: the first ``length_a`` positions of row
        ``a`` and the first ``length_b`` of row ``b`` (only the positions in use are copied)."""
        for buffer in (*self.keys, *self.values):
            held = buffer[a, :, :length_a].copy()
            buffer[a, :, :length_b] = buffer[b, :, :length_b]
            buffer[b, :, :length_a] = held

    def copy(self, source: int, target: int, lo: int, hi: int) -> None:
        """Positions ``[lo, hi)`` of row ``source`` into row ``target`` (a shared prefix)."""
        for buffer in (*self.keys, *self.values):
            buffer[target, :, lo:hi] = buffer[source, :, lo:hi]

    def read(self, row: int, lo: int, hi: int) -> np.ndarray:
        """Positions ``[lo, hi)`` of ``row``, every layer's keys and values, as one new array
        ``[layers, 2, kv_heads, hi - lo, head_size]``."""
        first = self.keys[0]
        out = np.empty((len(self.keys), 2, first.shape[1], hi - lo, first.shape[3]), first.dtype)
        for layer, (keys, values) in enumerate(zip(self.keys, self.values, strict=True)):
            out[layer, 0] = keys[row, :, lo:hi]
            out[layer, 1] = values[row, :, lo:hi]
        return out

    def write(self, row: int, lo: int, block: np.ndarray) -> None:
        """What :meth:`read` returned, into positions ``[lo, lo + block length)`` of ``row``."""
        hi = lo + block.shape[3]
        for layer, (keys, values) in enumerate(zip(self.keys, self.values, strict=True)):
            keys[row, :, lo:hi] = block[layer, 0]
            values[row, :, lo:hi] = block[layer, 1]

    def ortvalues(self, layer: int, rows: tuple[int, int]) -> tuple[Any, Any]:
        """Layer ``layer``'s key and value rows ``[lo, hi)`` as OrtValues over the buffers."""
        lo, hi = rows
        return (
            self._ortvalue(self.keys[layer][lo:hi]),
            self._ortvalue(self.values[layer][lo:hi]),
        )
