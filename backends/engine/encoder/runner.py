"""The onnxruntime session of one encoder and the padded batch it runs.

Rows are right-padded to the longest; the graph's inputs are fed by name (``input_ids``,
``attention_mask``, and ``token_type_ids`` / ``position_ids`` where the graph has them).
``InferenceSession.run`` releases the GIL.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from backends.engine.encoder.pooling import Array, pool
from backends.engine.encoder.tokenize import Encoded
from backends.errors import StartupError
from backends.models.encoder import EncoderSpec

_KNOWN = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


class EncoderRunner:
    def __init__(self, spec: EncoderSpec, threads: int | None = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        # Idle pool threads that spin take the cores the event loop and the owner thread need
        # between batches: measured (bench embed, MiniLM shape, 2 cores), one short request
        # 13.1 -> 7.3 ms and 8 in flight 105 -> 139 sentences/s without spinning.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # onnxruntime's CPU arena grows to the largest batch it has run and keeps it; shrunk
        # after each run, what a batch of GENAI batch_tokens needed goes back (issue 37).
        self.run_options = ort.RunOptions()
        self.run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self.spec = spec
        self.session = ort.InferenceSession(
            str(spec.onnx_path), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i.name for i in self.session.get_inputs()]
        unknown = [name for name in self.inputs if name not in _KNOWN]
        if unknown or "input_ids" not in self.inputs:
            raise StartupError(
                f"{spec.onnx_path}: inputs {self.inputs} are not an encoder's "
                f"({', '.join(_KNOWN)})."
            )
        shape = self.session.get_outputs()[0].shape
        self.width = shape[-1] if isinstance(shape[-1], int) else spec.hidden_size

    def feeds(self, rows: Sequence[Encoded]) -> dict[str, npt.NDArray[np.int64]]:
        longest = max(len(r.ids) for r in rows)
        ids = np.full((len(rows), longest), self.spec.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), longest), dtype=np.int64)
        types = np.zeros((len(rows), longest), dtype=np.int64)
        for b, row in enumerate(rows):
            n = len(row.ids)
            ids[b, :n] = row.ids
            mask[b, :n] = 1
            if row.type_ids is not None:
                types[b, :n] = row.type_ids
        positions = np.broadcast_to(np.arange(longest, dtype=np.int64), ids.shape)
        every = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": types,
            "position_ids": np.ascontiguousarray(positions),
        }
        return {name: every[name] for name in self.inputs}

    def run(self, rows: Sequence[Encoded]) -> Array:
        """[B, H] pooled (not yet normalised) vectors, or [B, labels] logits for a reranker."""
        feeds = self.feeds(rows)
        [out] = self.session.run([self.spec.output], feeds, self.run_options)
        out = np.asarray(out, dtype=np.float32)
        if self.spec.kind == "reranker" or self.spec.pooled_output:
            return out
        mask = feeds.get("attention_mask")
        if mask is None:
            mask = (feeds["input_ids"] != self.spec.pad_id).astype(np.int64)
        return pool(out, mask, self.spec.pooling)
