"""A real round-robin proxy for the tests: Debian's ``nginx`` in front of several servers on
loopback, as a load balancer or Kubernetes Service spreads requests over replicas. Each answer
names the replica that gave it (``X-Upstream``: nginx's ``$upstream_addr``). ``.ci/run``
installs nginx; without it the tests that need it are skipped, saying why."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.harness.server import free_port

CONFIG = """
daemon off;
worker_processes 1;  # one round-robin turn for all requests, so consecutive ones alternate
{user}
pid {home}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {home}/body;
    proxy_temp_path {home}/proxy;
    fastcgi_temp_path {home}/fastcgi;
    uwsgi_temp_path {home}/uwsgi;
    scgi_temp_path {home}/scgi;
    upstream replicas {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 64m;
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;  # server-sent events pass as they come
            proxy_read_timeout 300s;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def nginx() -> str | None:
    # Debian puts it in /usr/sbin, which a user's PATH may lack.
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


def missing() -> str | None:
    """Why no proxy can be started here; None when one can."""
    if nginx() is None:
        return "nginx is not installed (Debian: apt-get install nginx; .ci/run does)"
    return None


@contextmanager
def round_robin(upstreams: Sequence[str]) -> Iterator[str]:
    """nginx on a free loopback port, spreading requests over ``upstreams`` (``host:port``)
    in turn; its URL. A replica that refuses connections is skipped for 30 s (nginx's
    ``max_fails=1``), the request passed to the next one."""
    binary = nginx()
    assert binary is not None, missing()
    home = Path(tempfile.mkdtemp(prefix="genai-nginx-"))
    port = free_port()
    servers = "\n".join(f"        server {u} max_fails=1 fail_timeout=30s;" for u in upstreams)
    user = "user root root;" if os.geteuid() == 0 else ""  # workers would be nobody's
    config = home / "nginx.conf"
    config.write_text(CONFIG.format(home=home, port=port, servers=servers, user=user))
    log = home / "error.log"
    proc = subprocess.Popen(
        [binary, "-p", str(home), "-c", str(config), "-e", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, f"nginx exited: {log.read_text() if log.exists() else ''}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx did not listen in 10 s"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)
