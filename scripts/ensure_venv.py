"""Create ``.venv`` if needed and install requirements into it, one script at a time.

Both README commands (serve.sh and test.sh) fill the same environment; started together on a
fresh clone they used to create it at once and fail ("No module named pip"). They now take
turns under a file lock (released by the OS if a script is killed), and say what they do: the
first install takes a minute or two.

    python3 scripts/ensure_venv.py requirements.txt [more requirement files]
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"


def main(requirements: list[str]) -> int:
    with open(ROOT / ".venv.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("waiting for another script that is installing into .venv ...", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        python = VENV / "bin" / "python"
        fresh = not python.exists()
        if fresh:
            print("creating .venv ...", flush=True)
            venv.create(VENV, with_pip=True)
        for file in requirements:
            print(f"installing {file} into .venv ...", flush=True)
            args = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
            # A first install shows its progress (a minute or two); later ones stay quiet.
            args += ["--progress-bar", "off"] if fresh else ["-q"]
            done = subprocess.run([*args, "-r", str(ROOT / file)])
            if done.returncode:
                return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
