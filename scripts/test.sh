#!/usr/bin/env bash
# Install what the tests need into .venv (fresh machine: CPython 3.10+ and pip), then run
# linters and the test suite. This is the README's test command and what CI runs. Safe to run
# at the same time as scripts/serve.sh: the installs take turns.
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" scripts/ensure_venv.py requirements-dev.txt
.venv/bin/python -m ruff check .
.venv/bin/python -m ruff format --check .
.venv/bin/python -m mypy .
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
# The tiers in order of cost, each only if the one before passed: a broken unit test is
# reported in seconds, not after minutes of model and live-server tests.
for tier in unit model live; do
  echo "== pytest -m $tier"
  .venv/bin/python -m pytest -q -m "$tier"
done
