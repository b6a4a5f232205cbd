"""Models from the Hugging Face hub: ``GENAI_MODEL_DIR=hf:ORG/REPO[:VARIANT]`` and
``python main_genai.py pull ORG/REPO[:VARIANT]``.

``huggingface_hub`` moves the bytes: its cache, resumed transfers, ``HF_TOKEN``,
``HF_ENDPOINT``, ``HF_HUB_OFFLINE``. This module decides which files to fetch, with the same
logic that picks a variant in a hub-layout folder on disk (:mod:`backends.models.variants`):

1. the repo's file listing and every ``genai_config.json`` in it (a few KiB): the variant
   folders' configs say which execution provider each was made for
   (:mod:`backends.models.hub_plan`);
2. the chosen variant's files only (``snapshot_download(allow_patterns=...)``);
3. what step 2 fetched, checked against the hub's checksums (sha256 for LFS files, the git
   blob id for the others): huggingface_hub 2.4 checks sizes only. A file that does not match
   is removed from the cache, so that the next pull fetches it again
   (:mod:`backends.models.hub_listing`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from backends.config import HUB_SCHEME, ModelConfig, ServiceConfig, hub_source
from backends.errors import StartupError
from backends.models.hub_listing import Listed, cache_dir, cached_tree, matching, present, verify
from backends.models.hub_plan import CONFIG_PATTERNS, Plan, plan_files

log = logging.getLogger("genai.hub")


@dataclass(frozen=True)
class HubRef:
    """A hub repo and, optionally, the variant pinned in it (``ORG/REPO[:VARIANT]``)."""

    repo: str
    variant: str | None = None

    @classmethod
    def parse(cls, text: str) -> HubRef:
        repo, _, variant = text.strip().partition(":")
        parts = repo.split("/")
        if len(parts) != 2 or not all(p.strip() for p in parts) or any(" " in p for p in parts):
            raise StartupError(
                f"{HUB_SCHEME}{text}: name a Hugging Face hub repo as {HUB_SCHEME}ORG/REPO, "
                "optionally with :VARIANT (a variant folder or ONNX file in it)."
            )
        return cls(repo, variant.strip().strip("/") or None)

    def __str__(self) -> str:
        return f"{HUB_SCHEME}{self.repo}" + (f":{self.variant}" if self.variant else "")


@dataclass(frozen=True)
class Pulled:
    path: Path  # the folder to serve
    plan: Plan
    fetched: tuple[str, ...]  # files this call downloaded (and checked)


class NotCached(StartupError):
    """The repo, or the variant's files, are not all in the hub's cache."""


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _snapshot(
    ref: HubRef,
    patterns: Sequence[str],
    *,
    local_only: bool,
    revision: str | None = None,
) -> Path:
    from huggingface_hub import snapshot_download

    folder = snapshot_download(
        ref.repo,
        revision=revision,
        allow_patterns=list(patterns),
        cache_dir=cache_dir(),
        endpoint=os.environ.get("HF_ENDPOINT") or None,
        local_files_only=local_only,
    )
    return Path(folder)


def _hub_error(ref: HubRef, exc: Exception) -> StartupError:
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    if isinstance(exc, RepositoryNotFoundError | GatedRepoError):
        return StartupError(
            f"{ref}: no such repo on the hub, or a private or gated one (set HF_TOKEN)."
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StartupError(f"{ref}: download failed: {first}")


def _not_cached(ref: HubRef, missing: Sequence[str]) -> NotCached:
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        what = (
            f"is not complete in the Hugging Face cache: {len(missing)} file(s) missing ({shown})"
        )
    else:
        what = "is not in the Hugging Face cache"
    return NotCached(
        f"{ref} {what}, and HF_HUB_OFFLINE=1 forbids downloading. Pull it where the hub is "
        f"reachable: python main_genai.py pull {str(ref).removeprefix(HUB_SCHEME)}"
    )


@dataclass(frozen=True)
class FileProgress:
    """One file of a pull: its digest as the cached listing keeps it (``sha1:`` and the git
    blob id the hub lists; ``sha256:`` where the listing has an LFS sha256), its size and the
    bytes in the cache so far."""

    path: str
    digest: str
    total: int
    completed: int


Progress = Callable[[FileProgress], None]


def fetch(
    ref: HubRef, provider: str, *, local_only: bool, progress: Progress | None = None
) -> Pulled:
    """The variant of ``ref`` for ``provider``, from the cache only (``local_only``: NotCached
    if anything is missing) or downloaded as needed. StartupError says what went wrong.

    With ``progress``, the files are fetched one at a time and each one's bytes reported as
    they arrive (a file already in the cache once, complete); without, huggingface_hub's
    ``snapshot_download`` fetches them, with its terminal bars."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    name = str(ref)
    try:
        root = _snapshot(ref, CONFIG_PATTERNS, local_only=local_only)
        tree = cached_tree(ref.repo, root.name)
        plan = plan_files(root, tree, provider, ref.variant, name)
        before = present(root, tree)
        wanted = matching(tree, plan.patterns)
        if local_only and not wanted <= before:
            raise _not_cached(ref, sorted(wanted - before))
        if not local_only:
            log.info("%s: fetching %s", name, plan.why)
            # at the commit step 1 listed, whatever the branch holds by now
            if progress is None:
                root = _snapshot(ref, plan.patterns, local_only=False, revision=root.name)
            else:
                _download_each(ref, root.name, tree, sorted(wanted), before, progress)
    except LocalEntryNotFoundError:
        raise _not_cached(ref, []) from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise _hub_error(ref, exc) from None
    fetched = sorted((present(root, tree) & wanted) - before)
    verify(root, tree, fetched)
    return Pulled(root / plan.serve if plan.serve else root, plan, tuple(fetched))


def _file_digest(entry: Listed) -> str:
    return f"sha256:{entry.sha256}" if entry.sha256 is not None else f"sha1:{entry.blob_id}"


def _counting_bar(report: FileProgress, progress: Progress) -> Any:
    """A tqdm class for huggingface_hub's progress-bar hook that prints nothing and reports
    the bytes of ``report``'s file to ``progress``."""
    from tqdm import tqdm

    class Bar(tqdm):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "disable": True})
            self.done = int(kwargs.get("initial") or 0)

        def update(self, n: float | None = 1) -> bool | None:
            self.done += int(n or 0)
            progress(replace(report, completed=min(self.done, report.total)))
            return None

    return Bar


def _download_each(
    ref: HubRef,
    commit: str,
    tree: dict[str, Listed],
    files: Sequence[str],
    present: set[str],
    progress: Progress,
) -> None:
    """``files`` of ``ref`` at ``commit`` into the cache, one after the other, each one's bytes
    reported to ``progress`` (through huggingface_hub's own progress-bar hook)."""
    from huggingface_hub import hf_hub_download

    for path in files:
        entry = tree[path]
        report = FileProgress(path, _file_digest(entry), int(entry.size), 0)
        if path in present:
            progress(replace(report, completed=report.total))
            continue
        progress(report)

        hf_hub_download(
            ref.repo,
            path,
            revision=commit,
            cache_dir=cache_dir(),
            endpoint=os.environ.get("HF_ENDPOINT") or None,
            tqdm_class=_counting_bar(report, progress),
        )
        progress(replace(report, completed=report.total))


def _cached(repo: str) -> Any | None:
    """The hub cache's record of model repo ``repo`` (huggingface_hub's CachedRepoInfo)."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        scan = scan_cache_dir(cache_dir())
    except CacheNotFound:
        return None
    return next((r for r in scan.repos if r.repo_id == repo and r.repo_type == "model"), None)


def cache_folder(repo: str) -> Path | None:
    """Where the hub cache keeps ``repo`` (None: not in it)."""
    found = _cached(repo)
    return None if found is None else Path(found.repo_path)


def remove(repo: str) -> bool:
    """Delete every cached revision of ``repo`` through huggingface_hub's cache API (blobs
    no other revision uses go too); False if it was not in the cache."""
    from huggingface_hub import scan_cache_dir

    found = _cached(repo)
    if found is None:
        return False
    scan = scan_cache_dir(cache_dir())
    scan.delete_revisions(*(r.commit_hash for r in found.revisions)).execute()
    log.info("%s%s removed from the Hugging Face cache", HUB_SCHEME, repo)
    return True


def machine_provider(device: str) -> str:
    """The execution provider ``device`` means on this machine (``auto``: the first there)."""
    from backends.models.providers import detect_available, select_provider

    try:
        import onnxruntime_genai as og
    except ImportError:
        return "cpu" if device == "auto" else device
    return select_provider(device, detect_available(og)).name


def resolve(model: ModelConfig, provider: Callable[[str], str] = machine_provider) -> ModelConfig:
    """``model`` with an ``hf:`` path replaced by the cached folder to serve, downloaded first
    if it is not in the cache (with HF_HUB_OFFLINE=1: NotCached instead). A pin in the path
    (``:VARIANT``) wins over the model's ``variant``. Other paths are returned as they are."""
    source = hub_source(model.path)
    if source is None:
        return model
    ref = HubRef.parse(source)
    if ref.variant is None and model.variant:
        ref = replace(ref, variant=model.variant)
    choice = provider(model.device)
    try:
        pulled = fetch(ref, choice, local_only=True)
    except NotCached:
        if offline():
            raise
        log.info("%s is not in the Hugging Face cache: downloading it", ref)
        pulled = fetch(ref, choice, local_only=False)
    log.info("model %r: %s served from %s (%s)", model.name, ref, pulled.path, pulled.plan.why)
    return replace(model, path=pulled.path, variant=pulled.plan.variant)


def resolve_all(configs: Iterable[ServiceConfig]) -> list[ServiceConfig]:
    """Every served model's ``hf:`` path resolved (:func:`resolve`)."""
    return [replace(c, model=resolve(c.model)) for c in configs]


def main(argv: Sequence[str]) -> int:
    """``main_genai.py pull ORG/REPO[:VARIANT]``: download the variant for this machine."""
    parser = argparse.ArgumentParser(
        prog="main_genai.py pull",
        description="Download a model from the Hugging Face hub into its cache: only the "
        "variant this machine's execution provider serves. Then serve it with "
        "GENAI_MODEL_DIR=hf:ORG/REPO[:VARIANT]. HF_TOKEN, HF_ENDPOINT, HF_HUB_CACHE and "
        "HF_HUB_OFFLINE apply.",
    )
    parser.add_argument("source", help="ORG/REPO, or ORG/REPO:VARIANT to pin a variant")
    parser.add_argument(
        "--device",
        default=os.environ.get("GENAI_DEVICE", "auto"),
        help="execution provider to pick the variant for (default: GENAI_DEVICE, else auto)",
    )
    args = parser.parse_args(argv)
    for chatty in ("httpx", "httpx2"):  # a line per request: the progress bars say it better
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        ref = HubRef.parse(args.source.removeprefix(HUB_SCHEME))
        pulled = fetch(ref, machine_provider(args.device), local_only=offline())
    except StartupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{ref}: {pulled.plan.why}; {len(pulled.fetched)} file(s) downloaded, in {pulled.path}\n"
        f"serve it: GENAI_MODEL_DIR={ref} python main_genai.py",
        flush=True,
    )
    return 0
