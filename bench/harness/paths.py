"""Where the benchmark finds the repository, its cache of built models and the demo model."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "bench" / ".cache"
DEMO = ROOT / "models" / "demo-llama"
