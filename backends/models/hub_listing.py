"""The hub's listing of a commit, as huggingface_hub's cache keeps it, and the files of a
snapshot checked against it: sha256 for LFS files, the git blob id for the others
(huggingface_hub 2.4 checks sizes only). A file that does not match is removed from the cache,
so that the next pull fetches it again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from backends.errors import StartupError

_CHUNK = 1 << 20


def cache_dir() -> str | None:
    """The hub cache the environment names now (huggingface_hub reads it once, at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


@dataclass(frozen=True)
class Listed:
    """A file of the hub's listing of a commit, as the cache keeps it."""

    size: int
    blob_id: str  # its git blob: for an LFS file, the pointer's, not the content's
    sha256: str | None  # an LFS file's content hash; None for a file kept in git itself


def cached_tree(repo: str, commit: str) -> dict[str, Listed]:
    """The cached listing of ``commit``, LFS hashes included. (huggingface_hub 2.4's public
    ``get_cached_repo_tree`` drops them, and an LFS file's blob id names its pointer: checked
    against it, every weight file would fail.)"""
    from huggingface_hub import constants
    from huggingface_hub._tree_cache import read_tree_cache
    from huggingface_hub.errors import CachedRepoTreeNotFoundError
    from huggingface_hub.file_download import repo_folder_name

    cache = cache_dir() or constants.HF_HUB_CACHE
    folder = Path(cache, repo_folder_name(repo_id=repo, repo_type="model"))
    entries = read_tree_cache(str(folder), commit)
    if entries is None:
        raise CachedRepoTreeNotFoundError(f"no cached listing of {repo} at {commit}")
    return {path: Listed(e.size, e.blob_id, e.lfs_sha256) for path, e in entries.items()}


def present(root: Path, tree: dict[str, Listed]) -> set[str]:
    return {path for path in tree if (root / path).is_file()}


def matching(tree: dict[str, Listed], patterns: Sequence[str]) -> set[str]:
    # huggingface_hub's own matching of allow_patterns: fnmatch, case-sensitive
    return {path for path in tree if any(fnmatchcase(path, p) for p in patterns)}


def git_blob_id(path: Path) -> str:
    """The git object id of a file's content, which the hub lists for a non-LFS file."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    return _digest(path, digest)


def sha256(path: Path) -> str:
    return _digest(path, hashlib.sha256())


def _digest(path: Path, digest: Any) -> str:
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return str(digest.hexdigest())


def verify(root: Path, tree: dict[str, Listed], files: Iterable[str]) -> None:
    """Check ``files`` of the snapshot ``root`` against the hub's listing; a file that does not
    match is removed from the cache (its blob and link) and named in a StartupError."""
    bad: list[str] = []
    for name in sorted(files):
        entry, link = tree[name], root / name
        if entry.sha256 is not None:
            expected, actual = entry.sha256, sha256(link)
        else:
            expected, actual = entry.blob_id, git_blob_id(link)
        if actual != expected:
            bad.append(f"{name} (expected {expected[:12]}…, got {actual[:12]}…)")
            link.resolve().unlink(missing_ok=True)
            link.unlink(missing_ok=True)
    if bad:
        raise StartupError(
            f"checksum mismatch, the downloaded copy was removed: {'; '.join(bad)}. "
            "Pull again; if it fails again, the hub or a proxy serves corrupt data."
        )
