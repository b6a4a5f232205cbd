#!/usr/bin/env bash
# Install the runtime into .venv and start the server (settings from the environment / .env;
# with none, the embedded demo model on http://127.0.0.1:8002). Arguments are passed on as
# flags, e.g. `bash scripts/serve.sh --port 9000` (see `--help`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
exec .venv/bin/python main_genai.py "$@"
