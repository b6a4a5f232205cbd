"""Ollama's /api/pull and /api/delete over the Hugging Face hub (backends/models/hub.py).

A pull fetches the variant of ``ORG/REPO[:VARIANT]`` for this machine into the hub's cache,
reporting each file's bytes as Ollama reports a layer's, then declares the model to the
registry under that name, to load on its first request. A delete unloads a pulled model and
removes its repo from the cache (unless another served model is read from it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from backends.config import HUB_SCHEME, service_config
from backends.core.registry import ModelRegistry
from backends.errors import GenAIError, InvalidRequest, ModelNotFound, StartupError
from backends.models import hub
from config.models_file import model_fields
from config.settings import Settings
from schemas.ollama import PullProgress

_DONE = object()  # the pull's thread has finished


class PullFailed(GenAIError):
    """The hub refused the repo, or a file did not arrive whole."""

    status_code = 502
    code = "pull_failed"


@dataclass(frozen=True)
class Named:
    ref: hub.HubRef
    served: str  # the name requests use: what the client sent, ``hf:`` left off


def named(text: str) -> Named:
    """The hub repo a pull or delete names; 400 for a name that is not ``ORG/REPO[:VARIANT]``."""
    plain = text.strip().removeprefix(HUB_SCHEME)
    try:
        ref = hub.HubRef.parse(plain)
    except StartupError as exc:
        raise InvalidRequest(str(exc), param="model") from None
    return Named(ref, plain)


def _line(progress: PullProgress) -> str:
    return progress.model_dump_json(exclude_none=True)


async def pull_lines(models: ModelRegistry, settings: Settings, name: Named) -> AsyncIterator[str]:
    """The pull's progress, one JSON object a line; a failure raises (the stream's last line)."""
    yield _line(PullProgress(status="pulling manifest"))
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()

    def report(file: hub.FileProgress) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, file)

    def work() -> hub.Pulled:
        provider = hub.machine_provider(settings.model.device)
        return hub.fetch(name.ref, provider, local_only=hub.offline(), progress=report)

    task = asyncio.ensure_future(asyncio.to_thread(work))
    task.add_done_callback(lambda _: queue.put_nowait(_DONE))
    while (item := await queue.get()) is not _DONE:
        assert isinstance(item, hub.FileProgress)
        digest = item.digest.partition(":")[2]
        yield _line(
            PullProgress(
                status=f"pulling {digest[:12]}",
                digest=item.digest,
                total=item.total,
                completed=item.completed,
            )
        )
    try:
        pulled = task.result()
    except StartupError as exc:
        raise PullFailed(str(exc)) from None
    yield _line(PullProgress(status="verifying sha256 digest"))  # fetch checked each file
    yield _line(PullProgress(status="writing manifest"))
    _declare(models, settings, name, pulled)
    yield _line(PullProgress(status="success"))


def _declare(models: ModelRegistry, settings: Settings, name: Named, pulled: hub.Pulled) -> None:
    """Serve the pulled folder as ``name.served``, loaded on its first request. A name already
    served keeps what it serves (a second pull refreshes the cache only)."""
    if any(name.served in s.names for s in models.services):
        return
    fields = {
        **model_fields(settings.model),
        "name": name.served,
        "path": pulled.path,
        "variant": pulled.plan.variant,
        "adapters": {},
        "load": "first_use",
    }
    models.declare(service_config(fields, settings.server.limits()))


async def pull_whole(models: ModelRegistry, settings: Settings, name: Named) -> dict[str, str]:
    """``"stream": false``: the pull's last object."""
    last = ""
    async for line in pull_lines(models, settings, name):
        last = line
    return dict(json.loads(last))


async def delete(models: ModelRegistry, settings: Settings, name: Named) -> None:
    """Unload the pulled model ``name.served`` and remove its repo from the hub cache."""
    folder = await asyncio.to_thread(hub.cache_folder, name.ref.repo)
    service = next((s for s in models.services if s.model_name == name.served), None)
    if service is not None:
        if folder is None or not _under(service.config.model.path, folder):
            raise InvalidRequest(
                f"The model {name.served!r} was not pulled from the hub; unload it with "
                f"DELETE /admin/models/{name.served}.",
                param="model",
            )
        await models.unload(name.served, settings.server.shutdown_timeout)
    elif folder is None:
        raise ModelNotFound(f"The model {name.served!r} is not pulled.", param="model")
    assert folder is not None
    if any(_under(s.config.model.path, folder) for s in models.services):
        return  # another served model (another variant, a models-file entry) reads these files
    await asyncio.to_thread(hub.remove, name.ref.repo)


def _under(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError, ValueError):
        return False
