"""A peer in its own process: ``python -m bench.peers.worker KIND PATH THREADS``.

Reads one JSON request per line (``{"ids": [...], "new_tokens": n}``) and answers one JSON
result per line. Peers run out of the benchmark process because PyTorch's and llama.cpp's
OpenMP pools, living beside onnxruntime's in one process, slowed PyTorch down about 4x.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness.paths import ROOT
from bench.peers.raw import RawResult


class PeerProcess:
    def __init__(self, kind: str, path: Path, threads: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.peers.worker", kind, str(path), str(threads)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        hello = json.loads(self._readline())
        if "error" in hello:
            self.close()
            raise RuntimeError(hello["error"])
        self.version = str(hello["version"])

    def _readline(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"peer worker exited with {self.proc.wait()}")
        return line

    def run(self, ids: list[int], new_tokens: int) -> RawResult:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"ids": ids, "new_tokens": new_tokens}) + "\n")
        self.proc.stdin.flush()
        data = json.loads(self._readline())
        if "error" in data:
            raise RuntimeError(data["error"])
        return RawResult(**data)

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main() -> None:
    kind, path, threads = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    out = sys.stdout
    sys.stdout = sys.stderr  # libraries' chatter must not corrupt the protocol
    from bench.peers import libraries as peers

    peer: Any
    try:
        if kind == "transformers":
            peer = peers.TransformersPeer(path, threads)
        else:
            peer = peers.LlamaCppPeer(path, threads)
    except Exception as exc:
        out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        return
    out.write(json.dumps({"version": peer.version}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            res = peer.run(req["ids"], req["new_tokens"]).as_dict()
        except Exception as exc:
            res = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(res) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
