"""Several models behind one endpoint: a core (:class:`ModelService`) per model: a generator's,
an encoder's or a Whisper's. A request of the wrong kind for its model is a 400 naming the kind.

Every model has its own owner thread, scheduler and limits; a request's ``model`` picks one
(``None`` is the default, the first listed), and a LoRA adapter's name picks its base model,
which applies the adapter. The doors call :meth:`submit` and friends exactly as they would on
one service. Models can be loaded and unloaded at runtime: an unloaded model drains first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

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
    """What watches each model (metrics): attached when it is added, detached when removed."""

    def attach(self, service: ModelService) -> Observer | None: ...

    def detach(self, name: str) -> None: ...


class _Nothing:
    def attach(self, service: ModelService) -> Observer | None:
        return None

    def detach(self, name: str) -> None:
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
    ) -> None:
        if not services:
            raise ValueError("at least one model is needed")
        self._attachments = attachments or _Nothing()
        self._kv_events = kv_events  # for the models loaded at runtime
        self._services: dict[str, ModelService] = {}
        self._draining = False
        for service in services:
            self._add(service)

    @classmethod
    def from_configs(
        cls,
        configs: Sequence[ServiceConfig],
        attachments: Attachments | None = None,
        kv_events: KVEventPublisher | None = None,
    ) -> ModelRegistry:
        services = [make_service(config, kv_events) for config in configs]
        return cls(services, attachments, kv_events)

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
        return await self.get(request.model).submit(request)

    async def tokenize(self, prompt: Prompt, model: str | None = None) -> PreparedPrompt:
        return await self.get(model).tokenize(prompt, model)

    async def detokenize(self, token_ids: Sequence[int], model: str | None = None) -> str:
        return await self.get(model).detokenize(token_ids, model)

    async def render(self, request: GenerationRequest) -> list[PreparedPrompt]:
        return await self.get(request.model).render(request)

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
        """The default model's status (the seed's /healthz); see :meth:`statuses`."""
        return self.default.status

    def statuses(self) -> dict[str, Status]:
        return {name: service.status for name, service in self._services.items()}

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
        """Load every model (concurrently); a model that fails is logged and reports "error"
        while the others serve. Raises the default model's failure, if any."""
        results = await asyncio.gather(
            *(self._start(s) for s in self._services.values()), return_exceptions=True
        )
        first = results[0]
        if isinstance(first, BaseException):
            raise first

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self._services.values()))

    @property
    def draining(self) -> bool:
        return self._draining

    @draining.setter
    def draining(self, value: bool) -> None:
        """Draining: every model refuses new work (503) and /readyz says so."""
        self._draining = value
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
        """Add and load a model at runtime. Its name (and its adapters') must be new; if it
        fails to load it is removed again and the error raised."""
        if is_speech_folder(config.model.path):
            raise InvalidRequest(
                "A speech-to-text (whisper) model cannot be loaded at runtime yet; list it in "
                "the models file.",
                param="path",
            )
        service = self._add(make_service(config, self._kv_events))
        try:
            await service.start()
        except BaseException:
            self._remove(service.model_name)
            await service.stop()
            raise
        log.info(
            "model %r loaded from %s on %s", service.model_name, service.model_dir, service.device
        )
        return service

    async def unload(self, name: str, timeout: float) -> int:
        """Drain model ``name`` (up to ``timeout`` s, then cancel), stop it and remove it.
        Returns how many of its sequences had to be cancelled."""
        service = self._services.get(name)
        if service is None:
            self.get(name)  # a 404 that lists the served models
            raise InvalidRequest(f"{name!r} is an adapter; unload its model.", param="name")
        if len(self._services) == 1:
            raise InvalidRequest("The last model cannot be unloaded.", param="name")
        self._remove(name)  # no new requests reach it from here on
        cancelled = await service.drain(timeout)
        await service.stop()
        log.info("model %r unloaded (%d sequences cancelled)", name, cancelled)
        return cancelled

    # ---- internals -----------------------------------------------------------------------
    def _add(self, service: ModelService) -> ModelService:
        taken = {m.id for m in self.served()} if self._services else set()
        clash = sorted(taken & set(service.names))
        if clash:
            raise InvalidRequest(f"The name {clash[0]!r} is already served.", param="name")
        service.observer = self._attachments.attach(service)
        service.draining = self._draining
        self._services[service.model_name] = service
        return service

    def _remove(self, name: str) -> None:
        del self._services[name]
        self._attachments.detach(name)

    async def _start(self, service: ModelService) -> None:
        try:
            await service.start()
            log.info(
                "model %r ready: %s on %s", service.model_name, service.model_dir, service.device
            )
        except Exception as exc:  # its /healthz entry reports "error"; the message is here
            log.error("model %r failed to load: %s", service.model_name, exc)
            raise
