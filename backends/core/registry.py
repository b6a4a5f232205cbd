"""Several models behind one endpoint: a core (:class:`ModelService`) per model: a generator's,
an encoder's or a Whisper's. A request of the wrong kind for its model is a 400 naming the kind.

Every model has its own owner thread, scheduler and limits; a request's ``model`` picks one
(``None`` is the default, the first listed), and a LoRA adapter's name picks its base model,
which applies the adapter. The doors call :meth:`submit` and friends exactly as they would on
one service. Models can be loaded and unloaded at runtime: an unloaded model drains first.

Every declared model has a residency (backends/core/residency.py): loaded with the server or
by the first request that holds it (:meth:`hold`; requests meanwhile wait for that one load),
unloaded when its keep-alive runs out, and evicted, least recently used and idle first, when
another must load and ``max_loaded`` are in memory. An unloaded model keeps a core that was
never started (so it is listed, and a lookup finds it); loading starts that core, unloading
stops it and puts a fresh one in its place: a core's owner thread runs once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from backends.config import ServiceConfig
from backends.core.encoder_service import EncoderService
from backends.core.handle import RequestHandle
from backends.core.model_service import (
    ModelKind,
    ModelService,
    Observer,
    RequestStats,
    ServiceStats,
    Status,
)
from backends.core.request import GenerationRequest, Prompt
from backends.core.residency import Residency, Residents, UnloadReason, occupied
from backends.core.service import InferenceService
from backends.core.speech_service import TranscriptionService
from backends.engine.kv_events import KVEventPublisher
from backends.errors import InvalidRequest, ModelNotFound
from backends.models.encoder import serves_encoder
from backends.speech.whisper import is_speech_folder
from backends.types import PreparedPrompt

log = logging.getLogger("genai.registry")


@dataclass(frozen=True)
class ServedModel:
    """One id in ``/v1/models``: a model, or an adapter on one (``parent``)."""

    id: str
    service: ModelService
    parent: str | None = None

    @property
    def max_length(self) -> int | None:
        return self.service.max_length

    @property
    def kind(self) -> ModelKind:
        return self.service.kind

    @property
    def modalities(self) -> tuple[str, ...] | None:
        return self.service.modalities


class Attachments(Protocol):
    """What watches each model (metrics): attached when it is added (and to each new core of
    it), detached when removed; told of every load and unload."""

    def attach(self, service: ModelService) -> Observer | None: ...

    def detach(self, name: str) -> None: ...

    def on_loaded(self, name: str, seconds: float) -> None: ...

    def on_unloaded(self, name: str, reason: UnloadReason) -> None: ...


class _Nothing:
    def attach(self, service: ModelService) -> Observer | None:
        return None

    def detach(self, name: str) -> None:
        pass

    def on_loaded(self, name: str, seconds: float) -> None:
        pass

    def on_unloaded(self, name: str, reason: UnloadReason) -> None:
        pass


def make_service(config: ServiceConfig, kv_events: KVEventPublisher | None = None) -> ModelService:
    """A generator's core, an encoder's or a Whisper's: as the models file says, else as the
    folder says. A generator publishes its KV events on ``kv_events``, under its own topic."""
    if is_speech_folder(config.model.path):
        return TranscriptionService(config)
    if serves_encoder(config.model):
        return EncoderService(config)
    sink = kv_events.sink(config.model.name) if kv_events is not None else None
    return InferenceService(config, kv_events=sink)


class ModelRegistry:
    def __init__(
        self,
        services: Sequence[ModelService],
        attachments: Attachments | None = None,
        kv_events: KVEventPublisher | None = None,
        *,
        max_loaded: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        tick: float = 0.25,
    ) -> None:
        """``max_loaded``: models in memory at once at most (None: no cap); ``tick``: how often
        keep-alives are checked (and a load waiting for room looks again)."""
        if not services:
            raise ValueError("at least one model is needed")
        self._attachments = attachments or _Nothing()
        self._kv_events = kv_events  # for the models loaded at runtime
        self._services: dict[str, ModelService] = {}
        self._residents = Residents(
            self._services,
            self._renew,
            self._attachments,
            max_loaded=max_loaded,
            clock=clock,
            tick=tick,
        )
        self._draining = False
        for service in services:
            self._add(service)

    @classmethod
    def from_configs(
        cls,
        configs: Sequence[ServiceConfig],
        attachments: Attachments | None = None,
        kv_events: KVEventPublisher | None = None,
        *,
        max_loaded: int | None = None,
    ) -> ModelRegistry:
        services = [make_service(config, kv_events) for config in configs]
        return cls(services, attachments, kv_events, max_loaded=max_loaded)

    # ---- lookup --------------------------------------------------------------------------
    @property
    def default(self) -> ModelService:
        return next(iter(self._services.values()))

    @property
    def services(self) -> list[ModelService]:
        return list(self._services.values())

    def get(self, name: str | None, kind: ModelKind = "generator") -> ModelService:
        """The service that serves ``name`` (a model or one of its adapters); None: the first
        model of ``kind`` (else the first model, which says what it serves)."""
        if name is None:
            fits = [s for s in self._services.values() if s.kind == kind]
            return fits[0] if fits else self.default
        for service in self._services.values():
            if name in service.names:
                return service
        raise self._not_found(name)

    def served_model(self, name: str) -> ServedModel:
        for model in self.served():
            if model.id == name:
                return model
        raise self._not_found(name)

    def _not_found(self, name: str) -> ModelNotFound:
        served = ", ".join(repr(m.id) for m in self.served())
        return ModelNotFound(
            f"The model {name!r} does not exist; this server serves {served}.", param="model"
        )

    def served(self) -> list[ServedModel]:
        """Every id requests may name: each model, then its adapters."""
        out = []
        for service in self._services.values():
            out.append(ServedModel(service.model_name, service))
            out += [ServedModel(a, service, service.model_name) for a in service.adapter_names]
        return out

    # ---- what one service offers, routed by model ----------------------------------------
    async def submit(self, request: GenerationRequest) -> RequestHandle:
        async with self.hold(request.model) as service:  # until it is queued: then it is seen
            return await service.submit(request)

    async def tokenize(self, prompt: Prompt, model: str | None = None) -> PreparedPrompt:
        async with self.hold(model) as service:
            return await service.tokenize(prompt, model)

    async def detokenize(self, token_ids: Sequence[int], model: str | None = None) -> str:
        async with self.hold(model) as service:
            return await service.detokenize(token_ids, model)

    async def render(self, request: GenerationRequest) -> list[PreparedPrompt]:
        async with self.hold(request.model) as service:
            return await service.render(request)

    def cancel(self, request_id: str) -> bool:
        return any(service.cancel(request_id) for service in self._services.values())

    def stats(self) -> ServiceStats:
        """Every model's requests, each tagged with its model."""
        requests: list[RequestStats] = []
        for service in self._services.values():
            requests += [replace(r, model=service.model_name) for r in service.stats().requests]
        running = sum(r.state == "running" for r in requests)
        return ServiceStats(running, len(requests) - running, tuple(requests))

    @property
    def status(self) -> Status:
        """The default model's status (the seed's /healthz); see :meth:`statuses`. A default
        model that is not in memory is "ok": its first request loads it."""
        if not self.is_loaded(self.default.model_name):
            return "ok"
        return self.default.status

    def statuses(self) -> dict[str, Status | Literal["unloaded"]]:
        """Each model's status; "unloaded" for one not in memory (loaded on first use)."""
        return {
            name: service.status if self.is_loaded(name) else "unloaded"
            for name, service in self._services.items()
        }

    def is_loaded(self, name: str) -> bool:
        """Model ``name`` is in memory (or loading: it counts against the cap)."""
        return self._residents.is_loaded(name)

    def residency(self, name: str) -> Residency:
        """Model ``name``'s residency (read only: the registry's own record)."""
        return self._residents.slots[name]

    def expires_in(self, name: str) -> float | None:
        """Seconds until loaded model ``name`` is unloaded if no request comes; None: never."""
        return self._residents.expires_in(name)

    @property
    def loaded_count(self) -> int:
        """Models in memory (loading, loaded or being unloaded)."""
        return occupied(self._residents.slots.values())

    def modalities(self) -> dict[str, list[str]]:
        """What each loaded model reads (text, image, audio)."""
        return {
            name: list(service.modalities)
            for name, service in self._services.items()
            if service.modalities is not None
        }

    def kinds(self) -> dict[str, ModelKind]:
        return {name: service.kind for name, service in self._services.items()}

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Load every model declared to load at start (concurrently), and start watching
        keep-alives; a model that fails is logged and reports "error" while the others serve.
        Raises the default model's failure, if any."""
        self._residents.watch()
        at_start = [s for s in self._services.values() if s.config.model.load == "start"]
        names = [s.model_name for s in at_start]
        self._residents.loading(names)
        results = await asyncio.gather(*(self._start(s) for s in at_start), return_exceptions=True)
        self._residents.loaded(names)
        first = dict(zip(names, results, strict=True)).get(self.default.model_name)
        if isinstance(first, BaseException):
            raise first

    async def stop(self) -> None:
        await self._residents.close()
        await asyncio.gather(*(s.stop() for s in self._services.values()))

    @property
    def draining(self) -> bool:
        return self._draining

    @draining.setter
    def draining(self, value: bool) -> None:
        """Draining: every model refuses new work (503) and /readyz says so."""
        self._draining = value
        self._residents.draining = value
        for service in self._services.values():
            service.draining = value

    async def drain(self, timeout: float) -> int:
        self.draining = True
        counts = await asyncio.gather(*(s.drain(timeout) for s in self._services.values()))
        return sum(counts)

    def generator(self, name: str | None) -> InferenceService:
        """The text-generation model ``name`` names (None: the first); another kind refuses."""
        service = self.get(name)
        if not isinstance(service, InferenceService):
            service._wrong_kind("generator")
        return service

    def encoder(self, name: str | None, kind: ModelKind) -> EncoderService:
        """The encoder ``name`` names (None: the first of ``kind``); a generator refuses."""
        service = self.get(name, kind)
        if not isinstance(service, EncoderService):
            service._wrong_kind(kind)
        return service

    def transcriber(self, name: str | None) -> TranscriptionService:
        """The speech model ``name`` names (None: the first); another kind refuses."""
        service = self.get(name, "transcription")
        if not isinstance(service, TranscriptionService):
            service._wrong_kind("transcription")
        return service

    async def load(self, config: ServiceConfig) -> ModelService:
        """Add and load a model at runtime (evicting an idle one if ``max_loaded`` are in
        memory). Its name (and its adapters') must be new; if it fails to load it is removed
        again and the error raised."""
        if is_speech_folder(config.model.path):
            raise InvalidRequest(
                "A speech-to-text (whisper) model cannot be loaded at runtime yet; list it in "
                "the models file.",
                param="path",
            )
        service = self._add(make_service(config, self._kv_events))
        try:
            await self._residents.load(service.model_name)
        except BaseException:
            if service.model_name in self._services:
                self._remove(service.model_name)
            await service.stop()
            raise
        return self._services[service.model_name]

    def declare(self, config: ServiceConfig) -> ModelService:
        """Add a model at runtime without loading it: its first request loads it, as for a
        model declared with ``load = "first_use"`` (which ``config`` must say). Its name (and
        its adapters') must be new."""
        if config.model.load != "first_use":
            raise ValueError("a model declared at runtime loads on first use")
        return self._add(make_service(config, self._kv_events))

    async def unload(self, name: str, timeout: float) -> int:
        """Drain model ``name`` (up to ``timeout`` s, then cancel), stop it and remove it.
        Returns how many of its sequences had to be cancelled."""
        service = self._services.get(name)
        if service is None:
            self.get(name)  # a 404 that lists the served models
            raise InvalidRequest(f"{name!r} is an adapter; unload its model.", param="name")
        if len(self._services) == 1:
            raise InvalidRequest("The last model cannot be unloaded.", param="name")
        await self._residents.settled(name)  # a load or an unload under way ends first
        service = self._services.get(name)
        if service is None:  # another unload took it meanwhile
            raise self._not_found(name)
        loaded = self.is_loaded(name)
        self._remove(name)  # no new requests reach it from here on
        cancelled = await service.drain(timeout)
        await service.stop()
        if loaded:
            self._attachments.on_unloaded(name, "admin")
        log.info("model %r unloaded (%d sequences cancelled)", name, cancelled)
        return cancelled

    @asynccontextmanager
    async def hold(
        self,
        name: str | None,
        kind: ModelKind = "generator",
        keep_loaded: float | None = None,
    ) -> AsyncIterator[ModelService]:
        """The model ``name`` serves (as :meth:`get` finds it), loaded, and kept from eviction
        and expiry while held: hold it until its request is queued (a queued request keeps
        it busy by itself). Loads it if it is not in memory; requests that come meanwhile
        wait for the same load, each up to its timeout. ``keep_loaded`` (seconds; negative:
        never) is how long it stays after this request; None: the model's own setting."""
        async with self._residents.hold(self.get(name, kind).model_name, keep_loaded) as service:
            yield service

    # ---- internals -----------------------------------------------------------------------
    def _add(self, service: ModelService) -> ModelService:
        taken = {m.id for m in self.served()} if self._services else set()
        clash = sorted(taken & set(service.names))
        if clash:
            raise InvalidRequest(f"The name {clash[0]!r} is already served.", param="name")
        self._replace(service)
        self._residents.declare(service.model_name, service.config)
        return service

    def _replace(self, service: ModelService) -> None:
        """``service`` is its model's core from now on (a new one after each unload)."""
        service.observer = self._attachments.attach(service)
        service.draining = self._draining
        self._services[service.model_name] = service

    def _renew(self, name: str) -> None:
        """Model ``name`` left memory: a fresh core, never started, takes its place."""
        self._replace(make_service(self._services[name].config, self._kv_events))

    def _remove(self, name: str) -> None:
        del self._services[name]
        self._residents.forget(name)
        self._attachments.detach(name)

    async def _start(self, service: ModelService) -> None:
        began = time.perf_counter()
        try:
            await service.start()
            self._attachments.on_loaded(service.model_name, time.perf_counter() - began)
            log.info(
                "model %r ready: %s on %s", service.model_name, service.model_dir, service.device
            )
        except Exception as exc:  # its /healthz entry reports "error"; the message is here
            log.error("model %r failed to load: %s", service.model_name, exc)
            raise
