"""The command line every model kind of the kit shares: ``--out FOLDER`` builds the model
there; with ``--check``, nothing is built, and the record in the folder is re-derived from its
weights and compared (exit status 1 when it differs)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def parser(
    doc: str | None, check_help: str = "re-derive expected.json from --out and compare"
) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", type=Path, required=True, help="the model folder")
    ap.add_argument("--check", action="store_true", help=check_help)
    return ap


def build_or_check(
    args: argparse.Namespace, build: Callable[[], None], check: Callable[[Path], int]
) -> None:
    """``check(args.out)`` and exit with its status under ``--check``; else ``build()``."""
    if args.check:
        sys.exit(check(args.out))
    build()
