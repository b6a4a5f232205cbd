"""The offline environment: the kit never reaches the model hub (there is none where the
project is built), and neither may the libraries it calls."""

from __future__ import annotations

import os

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def offline_env(**extra: str) -> dict[str, str]:
    """This process's environment for a subprocess, offline, with ``extra`` on top."""
    return dict(os.environ, **OFFLINE, **extra)


def go_offline() -> None:
    """This process offline too (set before ``huggingface_hub`` is imported)."""
    os.environ.update(OFFLINE)


def quiet_threads() -> None:
    """On a shared machine, torch's OpenMP threads spinning at each op's barrier wait for a
    partner the scheduler has put aside; sleeping waits give the same numbers, and were ten
    times faster under other jobs' load (docs/development.md). Set before torch loads."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
