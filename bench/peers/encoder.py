"""sentence-transformers on torch in its own process:
``python -m bench.peers.encoder PATH THREADS``.

Reads one JSON command per line and answers one JSON line:
- ``{"requests": [[text, ...], ...]}``: each request encoded alone, in order (what a server
  that calls ``encode`` per request does); the seconds each took;
- ``{"all": [text, ...]}``: everything in one ``encode`` call (batch 32, sorted by length
  inside sentence-transformers): its best case; the seconds it took.

Out of the benchmark's process: PyTorch's and onnxruntime's thread pools in one process slow
each other down.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.paths import ROOT


class STPeer:
    def __init__(self, path: Path, threads: int, python: str = sys.executable) -> None:
        self.proc = subprocess.Popen(
            [python, "-m", "bench.peers.encoder", str(path), str(threads)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        hello = self._ask(None)
        if "error" in hello:
            self.close()
            raise RuntimeError(hello["error"])
        self.version = str(hello["version"])

    def _ask(self, command: dict[str, Any] | None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command is not None:
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the sentence-transformers peer exited with {self.proc.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def per_request(self, requests: list[list[str]]) -> list[float]:
        return [float(s) for s in self._ask({"requests": requests})["seconds"]]

    def all_at_once(self, texts: list[str]) -> float:
        return float(self._ask({"all": texts})["seconds"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)


def main() -> None:
    path, threads = Path(sys.argv[1]), int(sys.argv[2])
    try:
        import sentence_transformers
        import torch

        torch.set_num_threads(threads)
        model = sentence_transformers.SentenceTransformer(str(path), device="cpu")
        model.encode(["warm up"] * 8)
    except Exception as exc:  # the benchmark reports the peer as unavailable
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return
    version = (
        f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}"
    )
    print(json.dumps({"version": version}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "requests" in command:
            seconds = []
            for texts in command["requests"]:
                start = time.perf_counter()
                model.encode(texts, batch_size=32)
                seconds.append(time.perf_counter() - start)
            print(json.dumps({"seconds": seconds}), flush=True)
        else:
            start = time.perf_counter()
            model.encode(command["all"], batch_size=32)
            print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    main()
