"""Decode-step time of the batch engine's decoder against the number of rows, nothing else
running: ``python -m bench steps``. What the scheduler can gain at most from batching.

With several model folders (build variants of the same weights) their steps alternate, run
for run, so drift on a shared machine hits all of them; the process's CPU time per step is
given beside the wall time (steadier when other work competes for the cores)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np


def _decoder(folder: Path, threads: int, slots: int, history: int) -> Any:
    import onnxruntime as ort

    from backends.engine.batch.decoder import Decoder, read_spec, session_options
    from backends.engine.batch.kv_cache import KVCache
    from backends.models.folder import inspect_model_folder

    model = inspect_model_folder(folder)
    path = str(model.path / model.config["model"]["decoder"]["filename"])
    options = session_options(ort, model, threads)
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    spec = read_spec(model, {i.name: i.type for i in session.get_inputs()})
    decoder, kv = Decoder(spec, session, ort), KVCache(spec, slots, history + 8, ort)
    ones = np.ones((1, history), dtype=np.int64)
    for row in range(slots):  # every row holds a prefilled history
        decoder.run(ones, ones, np.arange(history)[None], kv, (row, row + 1))
    return decoder, kv


def steps(
    folders: list[Path], rows: list[int], threads: int, history: int = 200, runs: int = 40
) -> str:
    decoders = {folder: _decoder(folder, threads, max(rows), history) for folder in folders}
    lines = [f"{threads} threads, {history} tokens of history per row; median wall (CPU) per step"]
    for n in rows:
        wall: dict[Path, list[float]] = {f: [] for f in folders}
        cpu: dict[Path, list[float]] = {f: [] for f in folders}
        for _ in range(runs):
            for folder, (decoder, kv) in decoders.items():
                used, started = time.process_time(), time.perf_counter()
                decoder.run(
                    np.ones((n, 1), dtype=np.int64),
                    np.ones((n, history + 1), dtype=np.int64),
                    np.full((n, 1), history),
                    kv,
                    (0, n),
                )
                wall[folder].append(time.perf_counter() - started)
                cpu[folder].append(time.process_time() - used)
        for folder in folders:
            step, used = statistics.median(wall[folder]), statistics.median(cpu[folder])
            lines.append(
                f"{folder.name}: {n} rows: {step * 1000:.1f} ms ({used * 1000:.1f} ms CPU) per "
                f"step, {n / step:.0f} tokens/s"
            )
    return "\n".join(lines)
