"""The expected-output record (``expected.json``) each committed test model carries: what the
reference library (transformers, sentence-transformers) produced on fixed inputs when the
model was built, which the server's tests compare with; and its check, which re-derives the
record from the committed weights and says where it differs."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FILE = "expected.json"


def _rounded(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, list):
        return [_rounded(v, digits) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    return value


def write_expected(out_dir: Path, record: dict[str, Any], digits: int | None = None) -> None:
    """``record`` as ``out_dir/expected.json`` (floats rounded to ``digits`` if given)."""
    value = record if digits is None else _rounded(record, digits)
    (out_dir / FILE).write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")


def read_expected(out_dir: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((out_dir / FILE).read_text(encoding="utf-8"))
    return result


def compare(
    expected: dict[str, Any],
    got: dict[str, Any],
    tol: float = 1e-5,
    keys: Iterable[str] | None = None,
) -> list[str]:
    """The keys (all, or ``keys``) where a re-derived record differs from the committed one:
    lists of floats within ``tol``, everything else exactly (``got`` as JSON gives it back)."""
    import numpy as np

    got = json.loads(json.dumps(got))
    problems = []
    for key in expected if keys is None else keys:
        want, have = expected[key], got.get(key)
        if isinstance(want, list) and want and isinstance(want[0], list | float):
            if np.max(np.abs(np.asarray(want) - np.asarray(have))) > tol:
                problems.append(key)
        elif want != have:
            problems.append(key)
    return problems


def report(problems: list[str]) -> int:
    """Print the check's verdict; the exit status (1 when the record differs)."""
    print(f"{FILE} matches the weights" if not problems else f"{FILE} differs: {problems}")
    return 1 if problems else 0
