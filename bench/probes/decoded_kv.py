"""Are KV positions written by decode steps (one token a step) the same bytes as the same tokens
prefilled? The batch engine's decoder on two KV rows: row 0 prefills a random prompt and
decodes greedily, row 1 prefills the prompt and those tokens (in 256-token chunks); then both
read the same two-token question. ``python -m bench.probes.decoded_kv MODEL_DIR [SEED]``.
Why prefix sharing copies only prefilled positions across sessions
(backends/engine/batch/slots.py, docs/prefix-sharing.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

PROMPT, DECODED, CHUNK = 300, 30, 256


def main(path: Path, seed: int) -> None:
    import onnxruntime as ort

    from backends.engine.batch.decoder import Decoder, read_spec, session_options
    from backends.engine.batch.kv_cache import KVCache
    from backends.models.folder import inspect_model_folder

    folder = inspect_model_folder(path)
    file = path / folder.config["model"]["decoder"]["filename"]
    options = session_options(ort, folder, 2)
    session = ort.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
    spec = read_spec(folder, {i.name: i.type for i in session.get_inputs()})
    kv = KVCache(spec, 2, folder.kv_capacity(PROMPT + DECODED + 8), ort)
    decoder = Decoder(spec, session, ort)
    rng = np.random.default_rng(seed)

    def feed(row: int, ids: list[int], past: int) -> np.ndarray:
        total = past + len(ids)
        mask = np.ones((1, total), np.int64)
        positions = np.arange(past, total, dtype=np.int64)[None, :]
        return decoder.run(np.asarray([ids], np.int64), mask, positions, kv, (row, row + 1))

    prompt = [int(t) for t in rng.integers(10, spec.vocab_size - 10, PROMPT)]
    logits, answer = feed(0, prompt, 0), []
    for i in range(DECODED):
        answer.append(int(np.argmax(logits[0, -1])))
        logits = feed(0, answer[-1:], PROMPT + i)
    whole = prompt + answer
    for lo in range(0, len(whole), CHUNK):
        feed(1, whole[lo : lo + CHUNK], lo)

    def gap(hi: int, lo: int = 0) -> float:
        return max(
            float(np.abs(b[0, :, lo:hi] - b[1, :, lo:hi]).max()) for b in kv.keys + kv.values
        )

    question = [int(t) for t in rng.integers(10, spec.vocab_size - 10, 2)]
    a, b = feed(0, question, len(whole))[0, -1], feed(1, question, len(whole))[0, -1]
    print(f"{path.name}: {PROMPT} prompt + {DECODED} decoded tokens, seed {seed}")
    print(f"  prompt positions, max |K/V difference|:  {gap(PROMPT):.3g}")
    print(f"  decoded positions, max |K/V difference|: {gap(len(whole), PROMPT):.3g}")
    same = int(np.argmax(a)) == int(np.argmax(b))
    print(f"  next token after a question: logits max difference {np.abs(a - b).max():.3g}")
    print(f"  same greedy token: {same}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
