"""Decode-step time of the batch engine's decoder against the number of rows, nothing else
running: ``python -m bench steps``. What the scheduler can gain at most from batching."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np


def steps(folder: Path, rows: list[int], threads: int, history: int = 200, runs: int = 40) -> str:
    import onnxruntime as ort

    from backends.engine.batch.decoder import Decoder, read_spec, session_options
    from backends.engine.batch.kv_cache import KVCache
    from backends.models.folder import inspect_model_folder

    model = inspect_model_folder(folder)
    path = str(model.path / model.config["model"]["decoder"]["filename"])
    options = session_options(ort, model, threads)
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    spec = read_spec(model, {i.name: i.type for i in session.get_inputs()})
    slots = max(rows)
    decoder, kv = Decoder(spec, session, ort), KVCache(spec, slots, history + 8, ort)
    ones = np.ones((1, history), dtype=np.int64)
    for row in range(slots):  # every row holds a prefilled history
        decoder.run(ones, ones, np.arange(history)[None], kv, (row, row + 1))
    lines = [f"{folder.name}: {threads} threads, {history} tokens of history per row"]
    for n in rows:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            decoder.run(
                np.ones((n, 1), dtype=np.int64),
                np.ones((n, history + 1), dtype=np.int64),
                np.full((n, 1), history),
                kv,
                (0, n),
            )
            times.append(time.perf_counter() - started)
        step = statistics.median(times)
        lines.append(f"{n} rows: {step * 1000:.1f} ms per step, {n / step:.0f} tokens/s")
    return "\n".join(lines)
