"""Hidden states to one vector per input; pure numpy, as sentence-transformers pools."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]


def pool(hidden: Array, mask: npt.NDArray[np.int64], mode: str) -> Array:
    """``hidden`` [B, S, H] and the attention ``mask`` [B, S] (right padding) to [B, H]."""
    if mode == "cls":
        return np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)
    if mode == "last":
        last = mask.sum(axis=1) - 1
        return np.ascontiguousarray(hidden[np.arange(hidden.shape[0]), last, :], dtype=np.float32)
    if mode == "mean":
        weights = mask[:, :, None].astype(np.float32)
        total: Array = (hidden * weights).sum(axis=1)
        counts: Array = np.clip(weights.sum(axis=1), 1e-9, None)
        return np.asarray(total / counts, dtype=np.float32)
    raise ValueError(f"unknown pooling {mode!r}")


def normalized(vectors: Array) -> Array:
    """Unit length rows (a zero row stays zero), as torch.nn.functional.normalize does."""
    norms: Array = np.clip(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12, None)
    return np.asarray(vectors / norms, dtype=np.float32)


def shortened(vector: Array, dimensions: int | None, normalize: bool) -> Array:
    """Matryoshka truncation to the first ``dimensions`` values, re-normalised if the model
    normalises (what sentence-transformers' ``truncate_dim`` does)."""
    if dimensions is None or dimensions >= vector.shape[-1]:
        return vector
    cut = vector[..., :dimensions]
    return normalized(cut) if normalize else np.ascontiguousarray(cut)


def sigmoid(logits: Array) -> Array:
    return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
