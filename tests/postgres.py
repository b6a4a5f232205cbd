"""A real PostgreSQL server for the tests: Debian's ``postgresql`` package (its ``initdb`` and
``pg_ctl``), on a temporary data directory and a free loopback port, with a fresh database for
each test that asks. ``.ci/run`` installs the package; without it the tests that need it are
skipped, saying why.

initdb refuses to run as root: as root (CI's containers), the server runs as the ``postgres``
user that the Debian package makes.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.harness.server import free_port

USER = "genai"  # the cluster's superuser (trusted on loopback: a throwaway server)


def binaries() -> Path | None:
    """The folder with initdb and pg_ctl: on the PATH, or where Debian puts each version."""
    on_path = shutil.which("pg_ctl")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    newest_first = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    candidates += [Path(p) for p in newest_first]
    found = (c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists())
    return next(found, None)


def _version(folder: str) -> int:
    name = Path(folder).parent.name
    return int(name) if name.isdigit() else 0


def missing() -> str | None:
    """Why no PostgreSQL can be started here; None when one can."""
    if binaries() is None:
        return "PostgreSQL is not installed (Debian: apt-get install postgresql; .ci/run does)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and initdb refuses root: no 'postgres' user to run it as"
    return None


@dataclass
class PostgresServer:
    bin: Path
    data: Path
    port: int = field(default_factory=free_port)
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def log(self) -> Path:
        return self.data.parent / "server.log"

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} "
            # A throwaway cluster: nothing need survive a power cut.
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self.run("pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.log), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        """``immediate``: as a crash would (no clean shutdown; the next start recovers)."""
        self.run("pg_ctl", "stop", "-w", "-D", str(self.data), "-m", mode)

    def processes(self) -> list[int]:
        """The server's processes: the postmaster (first) and its children."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # it ended
            if int(fields[1]) == postmaster:  # its parent
                children.append(int(Path(stat).parent.name))
        return [postmaster, *children]

    def freeze(self) -> None:
        """Stop every process of the server (``kill -STOP``): its sockets stay open and its
        kernel acknowledges what is sent, but nothing answers (a hung database)."""
        for pid in self.processes():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self.processes():
            os.kill(pid, signal.SIGCONT)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        """A fresh, empty database: its URL."""
        name = f"test_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def sql(self, url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """``query``'s rows in the database ``url`` (what a test reads behind the server)."""
        with psycopg.connect(url, autocommit=True) as db:
            cursor = db.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def run(self, *args: str) -> None:
        as_user = "postgres" if os.geteuid() == 0 else None
        done = subprocess.run(
            [str(self.bin / args[0]), *args[1:]], user=as_user, capture_output=True, text=True
        )
        if done.returncode != 0:
            more = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}{more}")


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A started server on loopback, stopped and its files removed afterwards."""
    bin_folder = binaries()
    assert bin_folder is not None, missing()
    folder = Path(tempfile.mkdtemp(prefix="genai-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    server = PostgresServer(bin_folder, folder / "data")
    try:
        server.run("initdb", "-D", str(server.data), "-U", USER, "--auth=trust", "--no-sync")
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
