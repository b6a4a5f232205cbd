#!/usr/bin/env bash
# Install the runtime into .venv and start the server (settings from the environment / .env;
# with none, the embedded demo model on http://127.0.0.1:8002). Arguments are passed on as
# flags, e.g. `bash scripts/serve.sh --port 9000` (see `--help`). Safe to run at the same time
# as scripts/test.sh: the installs take turns.
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" scripts/ensure_venv.py requirements.txt
exec .venv/bin/python main_genai.py "$@"
