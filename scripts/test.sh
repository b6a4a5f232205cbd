#!/usr/bin/env bash
# Install what the tests need into .venv (fresh machine: CPython 3.10+ and pip), then run
# linters and the test suite. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
.venv/bin/python -m mypy .
.venv/bin/python -m pytest -q "$@"
