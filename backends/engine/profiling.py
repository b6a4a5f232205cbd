"""A bounded onnxruntime profiling window: the next N model steps, at most M files kept.

onnxruntime-genai writes one profile file per Generator step (about 27 MB per 1,000 tokens),
so an open-ended switch can fill a disk. A window ends by itself after ``steps`` scheduler
steps, and the files beyond ``max_files`` (oldest first) are deleted as they are written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PATTERN = "ort_*.json"


@dataclass
class ProfileWindow:
    directory: Path
    steps: int  # scheduler steps left
    max_files: int

    @property
    def prefix(self) -> str:
        return str(self.directory / "ort")

    def prune(self) -> int:
        """Delete the oldest files beyond ``max_files``; how many are kept."""
        return prune(self.directory, self.max_files)


def prune(directory: Path, keep: int) -> int:
    if not directory.is_dir():
        return 0
    files = sorted(directory.glob(PATTERN), key=lambda p: p.stat().st_mtime)
    for old in files[: max(0, len(files) - keep)]:
        old.unlink(missing_ok=True)
    return min(len(files), keep)
