"""Decode-step time of the batch engine's decoder against the number of rows, nothing else
running: ``python -m bench steps``. What the scheduler can gain at most from batching.

With several model folders (build variants of the same weights) their steps alternate, run
for run, so drift on a shared machine hits all of them; the process's CPU time per step is
given beside the wall time (steadier when other work competes for the cores).

With ``--verify K``, also the time of a batch-1 run of ``1 + k`` tokens over the same history
for k = 0..K, as a multiple of a one-token step: the cost of verifying k drafted tokens
(n-gram speculation, docs/speculation.md), from which its speed-up on a model can be
projected."""

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
    capacity = model.kv_capacity(history)  # a sliding window: at least it
    decoder, kv = Decoder(spec, session, ort), KVCache(spec, slots, capacity, ort)
    ones = np.ones((1, history), dtype=np.int64)
    for row in range(slots):  # every row holds a prefilled history
        decoder.run(ones, ones, np.arange(history)[None], kv, (row, row + 1))
    return decoder, kv


def _timed(decoder: Any, kv: Any, rows: int, fed: int, history: int) -> tuple[float, float]:
    """Wall and CPU seconds of one run feeding ``fed`` tokens to each of ``rows`` rows."""
    used, started = time.process_time(), time.perf_counter()
    decoder.run(
        np.ones((rows, fed), dtype=np.int64),
        np.ones((rows, history + fed), dtype=np.int64),
        np.tile(np.arange(history, history + fed), (rows, 1)),
        kv,
        (0, rows),
    )
    return time.perf_counter() - started, time.process_time() - used


def steps(
    folders: list[Path],
    rows: list[int],
    threads: int,
    history: int = 200,
    runs: int = 40,
    verify: int = 0,
) -> str:
    # The KV rows hold the history, one step and the longest verify run's tokens.
    decoders = {f: _decoder(f, threads, max(rows), history + verify + 8) for f in folders}
    lines = [f"{threads} threads, {history} tokens of history per row; median wall (CPU) per step"]
    for n in rows:
        wall: dict[Path, list[float]] = {f: [] for f in folders}
        cpu: dict[Path, list[float]] = {f: [] for f in folders}
        for _ in range(runs):
            for folder, (decoder, kv) in decoders.items():
                took, used = _timed(decoder, kv, n, 1, history)
                wall[folder].append(took)
                cpu[folder].append(used)
        for folder in folders:
            step, used = statistics.median(wall[folder]), statistics.median(cpu[folder])
            lines.append(
                f"{folder.name}: {n} rows: {step * 1000:.1f} ms ({used * 1000:.1f} ms CPU) per "
                f"step, {n / step:.0f} tokens/s"
            )
    # Every length of every folder once per round, in turn: a busy machine's drift hits
    # them alike.
    lengths = range(verify + 1) if verify else range(0)
    # Speculation does not run on a graph with the last position's logits only, and its
    # verify runs there would skip the head of all positions but the last: not timed.
    verified = [f for f in folders if not decoders[f][0].spec.last_logits_only]
    lines += [
        f"{f.name}: no verify runs (the last position's logits only; export with --all-logits)"
        for f in folders
        if verify and f not in verified
    ]
    costs: dict[tuple[Path, int], list[float]] = {(f, k): [] for f in verified for k in lengths}
    for _ in range(runs):
        for (folder, k), times in costs.items():
            decoder, kv = decoders[folder]
            times.append(_timed(decoder, kv, 1, 1 + k, history)[0])
    for (folder, k), times in costs.items():
        cost, one = statistics.median(times), statistics.median(costs[(folder, 0)])
        lines.append(
            f"{folder.name}: verify 1+{k}: {cost * 1000:.2f} ms, T(1+k)/T(1) = {cost / one:.2f}"
        )
    return "\n".join(lines)
