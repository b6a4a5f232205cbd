"""Is an int8 KV cache slower than a float one? The batch engine's decoder (its own binding:
backends/engine/batch/decoder.py) on two folders that differ in the KV cache alone, e.g. a
``main_genai.py export`` of the same weights with and without ``--kv-cache int8``.

For each context length N: prefill N - 16 random tokens into an empty row in the engine's
default 256-token chunks, then time the 16 decode steps that bring it to N, one row alone and
``--rows`` rows together (each row a copy of the first, so every row reads the same positions).
The arms alternate within each round (the order flips every round), on one session each with
the same thread count, and each figure is the median over the rounds. Prints one JSON object:
the machine, then the figures by arm.

    python -m bench.probes.kv_int8_speed FLOAT_DIR INT8_DIR --contexts 2048 8192 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

CHUNK = 256  # the batch engine's default prefill chunk (GENAI_PREFILL_CHUNK)
STEPS = 16  # decode steps timed at each context length


class Arm:
    def __init__(self, path: Path, threads: int, rows: int, capacity: int) -> None:
        import onnxruntime as ort

        from backends.engine.batch.decoder import Decoder, read_spec, session_options
        from backends.engine.batch.kv_cache import KVCache
        from backends.models.folder import inspect_model_folder

        folder = inspect_model_folder(path)
        file = path / folder.config["model"]["decoder"]["filename"]
        options = session_options(ort, folder, threads)
        session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
        self.spec = read_spec(folder, {i.name: i.type for i in session.get_inputs()})
        self.kv = KVCache(self.spec, rows, capacity, ort)
        self.decoder = Decoder(self.spec, session, ort)
        self.rows = rows

    def _run(self, ids: np.ndarray, lengths: list[int], rows: tuple[int, int]) -> np.ndarray:
        fed = ids.shape[1]
        mask = np.zeros((len(lengths), max(lengths)), np.int64)
        for r, n in enumerate(lengths):
            mask[r, :n] = 1
        positions = np.array([[n - fed + i for i in range(fed)] for n in lengths], np.int64)
        return self.decoder.run(ids, mask, positions, self.kv, rows)

    def measure(self, context: int, seed: int) -> dict[str, float]:
        rng = np.random.default_rng(seed)
        length = context - STEPS  # the decode steps end at the context length
        prompt = rng.integers(10, self.spec.vocab_size - 10, length).astype(np.int64)
        started = time.perf_counter()
        for lo in range(0, length, CHUNK):
            chunk = prompt[lo : lo + CHUNK][None, :]
            logits = self._run(chunk, [lo + chunk.shape[1]], (0, 1))
        prefill = time.perf_counter() - started
        for row in range(1, self.rows):  # every row holds the same N positions
            self.kv.copy(0, row, 0, length)
        token = int(logits[0, -1].argmax())
        out: dict[str, float] = {"prefill_s": prefill}
        for rows in sorted({1, self.rows}):
            started = time.perf_counter()
            for step in range(STEPS):
                n = length + step + 1
                self._run(np.full((rows, 1), token, np.int64), [n] * rows, (0, rows))
            out[f"decode_ms_{rows}_rows"] = 1000 * (time.perf_counter() - started) / STEPS
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("float_dir", type=Path)
    ap.add_argument("int8_dir", type=Path)
    ap.add_argument("--contexts", type=int, nargs="+", default=[2048, 8192])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=4, help="rows of the batched decode steps")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads, both arms")
    args = ap.parse_args()
    from bench.harness.machine import describe

    capacity = max(args.contexts)
    arms = {
        "float": Arm(args.float_dir, args.threads, args.rows, capacity),
        "int8": Arm(args.int8_dir, args.threads, args.rows, capacity),
    }
    runs: dict[str, dict[int, list[dict[str, float]]]] = {a: {} for a in arms}
    for r in range(args.rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for context in args.contexts:
            for name in order:
                runs[name].setdefault(context, []).append(arms[name].measure(context, seed=r))
    machine = {**describe(), "command": f"python -m {__spec__.name} " + " ".join(sys.argv[1:])}
    result: dict[str, Any] = {"machine": machine, "threads": args.threads, "rounds": args.rounds}
    for name, arm in arms.items():
        result[name] = {
            "kib_per_token": arm.spec.bytes_per_token / 1024,
            **{
                str(context): {
                    key: round(statistics.median(run[key] for run in measured), 4)
                    for key in measured[0]
                }
                for context, measured in runs[name].items()
            },
        }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
