"""Decode-step time of the batch engine's decoder against the number of rows, nothing else
running: ``python -m bench steps``. What the scheduler can gain at most from batching.

With ``--verify K``, also the time of a batch-1 run of ``1 + k`` tokens over the same history
for k = 0..K, as a multiple of a one-token step: the cost of verifying k drafted tokens
(n-gram speculation, docs/speculation.md), from which its speed-up on a model can be
projected."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np


def steps(
    folder: Path,
    rows: list[int],
    threads: int,
    history: int = 200,
    runs: int = 40,
    verify: int = 0,
) -> str:
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
    capacity = model.kv_capacity(history + verify + 8)  # a sliding window: at least it
    decoder, kv = Decoder(spec, session, ort), KVCache(spec, slots, capacity, ort)
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
    # Every length once per round, in turn: a busy machine's drift hits them alike.
    costs: dict[int, list[float]] = {k: [] for k in range(verify + 1)} if verify else {}
    for _ in range(runs):
        for k, times in costs.items():
            started = time.perf_counter()
            decoder.run(
                np.ones((1, 1 + k), dtype=np.int64),
                np.ones((1, history + 1 + k), dtype=np.int64),
                np.arange(history, history + 1 + k)[None],
                kv,
                (0, 1),
            )
            times.append(time.perf_counter() - started)
    for k, times in costs.items():
        cost, one = statistics.median(times), statistics.median(costs[0])
        lines.append(f"verify 1+{k}: {cost * 1000:.2f} ms, T(1+k)/T(1) = {cost / one:.2f}")
    return "\n".join(lines)
