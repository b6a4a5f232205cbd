"""``python -m bench overlap``: the batch decoder's decode steps while a newcomer's prompt is
prefilled on another thread, by how the two share the intra-op threads: what the overlapped
prefill (``GENAI_PREFILL_OVERLAP``) is built on. The decoder alone, nothing else running."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROWS, HISTORY = 8, 200


def overlap(folder: Path, threads: int = 2, prompt: int = 128, runs: int = 6) -> str:
    import onnxruntime as ort

    from backends.engine.batch.decoder import Decoder, read_spec, session_options
    from backends.engine.batch.kv_cache import KVCache
    from backends.models.folder import inspect_model_folder

    model = inspect_model_folder(folder)
    path = str(model.path / model.config["model"]["decoder"]["filename"])

    def session(n: int) -> Any:
        options = session_options(ort, model, n)
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    sessions = session(threads), session(max(1, threads // 2))
    spec = read_spec(model, {i.name: i.type for i in sessions[0].get_inputs()})
    full, half = (Decoder(spec, s, ort) for s in sessions)
    kv = KVCache(spec, ROWS + 1, HISTORY + prompt + 8, ort)
    ones = np.ones((1, HISTORY), dtype=np.int64)
    for row in range(ROWS + 1):
        full.run(ones, ones, np.arange(HISTORY)[None], kv, (row, row + 1))

    def decode(d: Decoder) -> None:
        d.run(
            np.ones((ROWS, 1), dtype=np.int64),
            np.ones((ROWS, HISTORY + 1), dtype=np.int64),
            np.full((ROWS, 1), HISTORY),
            kv,
            (0, ROWS),
        )

    def prefill(d: Decoder) -> None:
        d.run(
            np.ones((1, prompt), dtype=np.int64),
            np.ones((1, HISTORY + prompt), dtype=np.int64),
            np.arange(HISTORY, HISTORY + prompt)[None],
            kv,
            (ROWS, ROWS + 1),
        )

    def alone(run: Callable[[], None], times: int) -> float:
        took = []
        for _ in range(times):
            started = time.perf_counter()
            run()
            took.append(time.perf_counter() - started)
        return statistics.median(took) * 1000

    def beside(dec: Decoder, pre: Decoder) -> tuple[float, float]:
        steps: list[float] = []
        prefills: list[float] = []
        for _ in range(runs):
            done = threading.Event()

            def feed(done: threading.Event = done) -> None:
                started = time.perf_counter()
                prefill(pre)
                prefills.append(time.perf_counter() - started)
                done.set()

            worker = threading.Thread(target=feed)
            worker.start()
            while not done.is_set():
                started = time.perf_counter()
                decode(dec)
                steps.append(time.perf_counter() - started)
            worker.join()
        return statistics.median(steps) * 1000, statistics.median(prefills) * 1000

    for _ in range(3):  # warm both sessions up
        decode(full), decode(half), prefill(full), prefill(half)
    n, h = threads, max(1, threads // 2)
    lines = [
        f"{folder.name}: {ROWS}-row decode steps ({HISTORY} tokens of history), "
        f"a {prompt}-token prefill; medians",
        f"decode alone, {n} / {h} threads: {alone(lambda: decode(full), 20):.1f} / "
        f"{alone(lambda: decode(half), 20):.1f} ms",
        f"prefill alone, {n} / {h} threads: {alone(lambda: prefill(full), 8):.0f} / "
        f"{alone(lambda: prefill(half), 8):.0f} ms",
    ]
    arms: list[tuple[str, Any, Any]] = [
        (f"both at once, the {n}-thread session for both", full, full),
        (f"both at once, decode {n} threads, prefill {h}", full, half),
        (f"both at once, {h} thread(s) each (GENAI_PREFILL_OVERLAP)", half, half),
    ]
    for name, dec, pre in arms:
        step, fed = beside(dec, pre)
        lines.append(f"{name}: decode step {step:.1f} ms, prefill {fed:.0f} ms")
    return "\n".join(lines)
