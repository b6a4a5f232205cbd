"""A Hugging Face hub on 127.0.0.1 for the tests: the real ``huggingface_hub`` client, pointed
at it with ``HF_ENDPOINT``, lists and downloads repos built from the test models.

It answers what ``snapshot_download`` asks in huggingface_hub 2.4 (read off its source and
checked by the tests that use it):

- ``GET /api/models/{repo}[/revision/{rev}]``: the model info (``sha``, ``siblings``);
- ``GET /api/models/{repo}/tree/{rev}?recursive=True``: every file with its git blob id
  (``oid``), size and, for an LFS file, ``lfs: {oid: sha256, size, pointerSize}``;
- ``HEAD``/``GET /{repo}/resolve/{rev}/{path}``: ``X-Repo-Commit``, ``ETag`` (the sha256 of an
  LFS file, else its blob id; ``X-Linked-Etag``/``X-Linked-Size`` too for LFS), ``Content-Length``
  and ``Range`` requests (206), which the client sends to resume a cut transfer;
- 404 with ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``).

Faults, per file path in a repo: ``cut`` (the first GET sends that many bytes, then drops the
connection), ``corrupt`` (the bytes change, the checksums the listing gives do not) and
``fail`` (GET answers 500). ``requests`` records what was asked: (method, path, Range).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

LFS_SUFFIXES = (".onnx", ".data", ".onnx_data", ".bin", ".safetensors")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class HubRepo:
    id: str  # ORG/NAME
    files: dict[str, bytes]

    @property
    def commit(self) -> str:
        listing = json.dumps({path: git_blob_id(data) for path, data in sorted(self.files.items())})
        return hashlib.sha1(listing.encode(), usedforsecurity=False).hexdigest()

    @staticmethod
    def is_lfs(path: str) -> bool:
        return path.endswith(LFS_SUFFIXES)

    def entry(self, path: str) -> dict[str, Any]:
        data = self.files[path]
        entry: dict[str, Any] = {
            "type": "file",
            "path": path,
            "size": len(data),
            "oid": git_blob_id(data),
        }
        if self.is_lfs(path):
            # As the hub lists an LFS file: its git blob is the pointer file, not the content.
            sha = hashlib.sha256(data).hexdigest()
            pointer = (
                f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n"
            )
            entry["oid"] = git_blob_id(pointer.encode())
            entry["lfs"] = {"oid": sha, "size": len(data), "pointerSize": len(pointer)}
        return entry

    def etag(self, path: str) -> str:
        entry = self.entry(path)
        return str(entry["lfs"]["oid"] if "lfs" in entry else entry["oid"])


def folder_files(folder: Path, prefix: str = "") -> dict[str, bytes]:
    """A folder's files as a repo's, under ``prefix``."""
    return {
        f"{prefix}{p.relative_to(folder).as_posix()}": p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@dataclass
class LocalHub:
    repos: Mapping[str, HubRepo]
    cut: dict[str, int] = field(default_factory=dict)
    corrupt: set[str] = field(default_factory=set)
    fail: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def downloads(self) -> list[str]:
        """The files GET fetched (not HEAD), as ``ORG/NAME/path``, in order."""
        found = []
        for method, path, _ in self.requests:
            parts = path.strip("/").split("/")
            if method == "GET" and len(parts) >= 5 and parts[2] == "resolve":
                found.append("/".join([*parts[:2], *parts[4:]]))
        return found

    def __enter__(self) -> LocalHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                hub.serve(self, "HEAD")

            def do_GET(self) -> None:
                hub.serve(self, "GET")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # -- the routes

    def serve(self, http: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(http.path)
        path = unquote(url.path)
        self.requests.append((method, path, http.headers.get("Range")))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo = self.repos.get(f"{parts[2]}/{parts[3]}")
            if repo is None:
                return _error(http, 404, "RepoNotFound", "Repository not found")
            rest = parts[4:]
            if not rest or rest[0] == "revision":
                if rest and not self._revision_ok(repo, rest[1]):
                    return _error(http, 404, "RevisionNotFound", "Invalid rev id")
                return _json(http, self._info(repo))
            if rest[0] == "tree" and len(rest) >= 2:
                if not self._revision_ok(repo, rest[1]):
                    return _error(http, 404, "RevisionNotFound", "Invalid rev id")
                under = "/".join(rest[2:])
                recursive = parse_qs(url.query).get("recursive", ["False"])[0].lower() == "true"
                return _json(http, self._tree(repo, under, recursive))
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = self.repos.get(f"{parts[0]}/{parts[1]}")
            if repo is None:
                return _error(http, 404, "RepoNotFound", "Repository not found")
            if not self._revision_ok(repo, parts[3]):
                return _error(http, 404, "RevisionNotFound", "Invalid rev id")
            file = "/".join(parts[4:])
            if file not in repo.files:
                return _error(http, 404, "EntryNotFound", "Entry not found", repo.commit)
            return self._file(http, method, repo, file)
        return _error(http, 404, None, "Not found")

    @staticmethod
    def _revision_ok(repo: HubRepo, revision: str) -> bool:
        return revision in ("main", repo.commit)

    @staticmethod
    def _info(repo: HubRepo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "modelId": repo.id,
            "sha": repo.commit,
            "private": False,
            "disabled": False,
            "gated": False,
            "tags": ["onnx"],
            "siblings": [{"rfilename": p} for p in sorted(repo.files)],
        }

    @staticmethod
    def _tree(repo: HubRepo, under: str, recursive: bool) -> list[dict[str, Any]]:
        prefix = f"{under.strip('/')}/" if under.strip("/") else ""
        entries: dict[str, dict[str, Any]] = {}
        for path in sorted(repo.files):
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix) :].split("/")
            for depth in range(1, len(rest)):  # the folders on the way
                folder = prefix + "/".join(rest[:depth])
                entries.setdefault(
                    folder, {"type": "directory", "path": folder, "oid": "0" * 40, "size": 0}
                )
                if not recursive:
                    break
            if recursive or len(rest) == 1:
                entries[path] = repo.entry(path)
        return list(entries.values())

    def _file(self, http: BaseHTTPRequestHandler, method: str, repo: HubRepo, file: str) -> None:
        data = repo.files[file]
        key = f"{repo.id}/{file}"
        if method == "GET" and key in self.fail:
            return _error(http, 500, None, "Internal Error")
        if key in self.corrupt:
            data = bytes(b ^ 0xFF for b in data[:64]) + data[64:]
        start = 0
        ranged = http.headers.get("Range")
        if ranged and ranged.startswith("bytes=") and method == "GET":
            start = int(ranged.removeprefix("bytes=").split("-")[0] or 0)
        body = data[start:]
        http.send_response(206 if start else 200)
        etag = repo.etag(file)
        http.send_header("ETag", f'"{etag}"')
        http.send_header("X-Repo-Commit", repo.commit)
        http.send_header("Accept-Ranges", "bytes")
        if repo.is_lfs(file):
            http.send_header("X-Linked-Etag", f'"{etag}"')
            http.send_header("X-Linked-Size", str(len(data)))
        if start:
            http.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        http.send_header("Content-Length", str(len(body)))
        http.send_header("Content-Type", "application/octet-stream")
        http.end_headers()
        if method == "HEAD":
            return
        cut = self.cut.pop(key, None)
        if cut is not None and cut < len(body):
            http.wfile.write(body[:cut])
            http.wfile.flush()
            http.close_connection = True  # the rest never comes: the client sees a short body
            return
        http.wfile.write(body)


def _json(http: BaseHTTPRequestHandler, value: Any) -> None:
    body = json.dumps(value).encode()
    http.send_response(200)
    http.send_header("Content-Type", "application/json")
    http.send_header("Content-Length", str(len(body)))
    http.end_headers()
    http.wfile.write(body)


def _error(
    http: BaseHTTPRequestHandler,
    status: int,
    code: str | None,
    message: str,
    commit: str | None = None,
) -> None:
    body = json.dumps({"error": message}).encode()
    http.send_response(status)
    if code:
        http.send_header("X-Error-Code", code)
        http.send_header("X-Error-Message", message)
    if commit:
        http.send_header("X-Repo-Commit", commit)
    http.send_header("Content-Type", "application/json")
    http.send_header("Content-Length", str(len(body)))
    http.end_headers()
    if http.command != "HEAD":
        http.wfile.write(body)


CPU_VARIANT = "cpu_and_mobile/cpu-int4-rtn-block-32-acc-level-4"
CUDA_VARIANT = "cuda/cuda-fp16"


def demo_repos(demo: Path) -> dict[str, HubRepo]:
    """``test-org/demo-llama``: the demo model's folder as a repo. ``test-org/demo-variants``:
    a repo in the layout of Microsoft's ONNX repos, one folder per variant: the demo model as
    the CPU variant and, as the CUDA one, the same files with a genai_config.json that names
    the CUDA provider (never served here: it must never be fetched on a CPU machine)."""
    files = folder_files(demo)
    config = json.loads(files["genai_config.json"])
    config["model"]["decoder"]["session_options"]["provider_options"] = [{"cuda": {}}]
    cuda = {**files, "genai_config.json": json.dumps(config, indent=4).encode()}
    readme = b"# demo variants\n"
    variants = {
        "README.md": readme,
        **{f"{CPU_VARIANT}/{p}": data for p, data in files.items()},
        **{f"{CUDA_VARIANT}/{p}": data for p, data in cuda.items()},
    }
    return {
        "test-org/demo-llama": HubRepo("test-org/demo-llama", files),
        "test-org/demo-variants": HubRepo("test-org/demo-variants", variants),
    }
