"""Several models behind one endpoint: a core (:class:`InferenceService`) per model.

Every model has its own owner thread, scheduler and limits; a request's ``model`` picks one
(``None`` is the default, the first listed), and a LoRA adapter's name picks its base model,
which applies the adapter. The doors call :meth:`submit` and friends exactly as they would on
one service. Models can be loaded and unloaded at runtime: an unloaded model drains first.

Speech-to-text models (Whisper) are served beside them by a :class:`TranscriptionService`
each: listed and loaded like any model, reached through :meth:`transcriber`; a chat request
that names one, or a transcription that names a chat model, is a 400 naming the model's kind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from backends.config import ServiceConfig
from backends.core.handle import RequestHandle
from backends.core.request import GenerationRequest, Prompt
from backends.core.service import InferenceService, Observer, RequestStats, ServiceStats, Status
from backends.errors import InvalidRequest, ModelNotFound
from backends.speech.service import TranscriptionService
from backends.speech.whisper import is_speech_folder
from backends.types import PreparedPrompt

log = logging.getLogger("genai.registry")


@dataclass(frozen=True)
class ServedModel:
    """One id in ``/v1/models``: a model, or an adapter on one (``parent``)."""

    id: str
    service: InferenceService | TranscriptionService
    parent: str | None = None

    @property
    def max_length(self) -> int | None:
        return self.service.max_length

    @property
    def modalities(self) -> tuple[str, ...] | None:
        return self.service.modalities


class Attachments(Protocol):
    """What watches each model (metrics): attached when it is added, detached when removed."""

    def attach(self, service: InferenceService | TranscriptionService) -> Observer | None: ...

    def detach(self, name: str) -> None: ...


class _Nothing:
    def attach(self, service: InferenceService | TranscriptionService) -> Observer | None:
        return None

    def detach(self, name: str) -> None:
        pass


class ModelRegistry:
    def __init__(
        self,
        services: Sequence[InferenceService],
        attachments: Attachments | None = None,
        speech: Sequence[TranscriptionService] = (),
    ) -> None:
        if not services and not speech:
            raise ValueError("at least one model is needed")
        self._attachments = attachments or _Nothing()
        self._services: dict[str, InferenceService] = {}
        self._speech: dict[str, TranscriptionService] = {}
        self._draining = False
        for service in services:
            self._add(service)
        for transcriber in speech:
            self._add_speech(transcriber)

    @classmethod
    def from_configs(
        cls, configs: Sequence[ServiceConfig], attachments: Attachments | None = None
    ) -> ModelRegistry:
        """A service per model; a Whisper folder gets a speech service."""
        speech = [c for c in configs if is_speech_folder(c.model.path)]
        chat = [c for c in configs if c not in speech]
        return cls(
            [InferenceService(config) for config in chat],
            attachments,
            [TranscriptionService(config) for config in speech],
        )

    # ---- lookup --------------------------------------------------------------------------
    @property
    def default(self) -> InferenceService | TranscriptionService:
        """The first model listed (a text-generation one, if any)."""
        return next(iter(self._everything()))

    @property
    def services(self) -> list[InferenceService]:
        return list(self._services.values())

    def get(self, name: str | None) -> InferenceService:
        """The service that serves ``name`` (a model or one of its adapters); None: default."""
        if name is None:
            default = self.default
            if isinstance(default, InferenceService):
                return default
            name = default.model_name  # a speech-only server: the 400 below names it
        for service in self._services.values():
            if name in service.names:
                return service
        if name in self._speech:
            raise InvalidRequest(
                f"The model {name!r} is a {TranscriptionService.kind} model: it serves "
                "/v1/audio/transcriptions, not text generation.",
                param="model",
            )
        raise self._not_found(name)

    def transcriber(self, name: str | None) -> TranscriptionService:
        """The speech service named ``name`` (None: the first); a chat model is a 400."""
        if name is None and self._speech:
            return next(iter(self._speech.values()))
        if name is not None and name in self._speech:
            return self._speech[name]
        if name is not None and any(name in s.names for s in self._services.values()):
            raise InvalidRequest(
                f"The model {name!r} is a text-generation model; transcription needs a "
                f"{TranscriptionService.kind} model"
                + (
                    f": this server serves {', '.join(map(repr, self._speech))}."
                    if self._speech
                    else ", and this server serves none."
                ),
                param="model",
            )
        if name is None:
            raise InvalidRequest(
                f"This server serves no {TranscriptionService.kind} model.", param="model"
            )
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
        out += [ServedModel(name, speech) for name, speech in self._speech.items()]
        return out

    # ---- what one service offers, routed by model ----------------------------------------
    async def submit(self, request: GenerationRequest) -> RequestHandle:
        return await self.get(request.model).submit(request)

    async def tokenize(self, prompt: Prompt, model: str | None = None) -> PreparedPrompt:
        return await self.get(model).tokenize(prompt, model)

    async def detokenize(self, token_ids: Sequence[int], model: str | None = None) -> str:
        return await self.get(model).detokenize(token_ids, model)

    def cancel(self, request_id: str) -> bool:
        return any(service.cancel(request_id) for service in self._everything())

    def stats(self) -> ServiceStats:
        """Every model's requests, each tagged with its model."""
        requests: list[RequestStats] = []
        for service in self._everything():
            requests += [replace(r, model=service.model_name) for r in service.stats().requests]
        running = sum(r.state == "running" for r in requests)
        return ServiceStats(running, len(requests) - running, tuple(requests))

    @property
    def status(self) -> Status:
        """The default model's status (the seed's /healthz); see :meth:`statuses`."""
        return self.default.status

    def statuses(self) -> dict[str, Status]:
        return {service.model_name: service.status for service in self._everything()}

    def modalities(self) -> dict[str, list[str]]:
        """What each loaded model reads (text, image, audio)."""
        return {
            name: list(service.modalities)
            for name, service in self._services.items()
            if service.modalities is not None
        }

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Load every model (concurrently); a model that fails is logged and reports "error"
        while the others serve. Raises the default model's failure, if any."""
        results = await asyncio.gather(
            *(self._start(s) for s in self._everything()), return_exceptions=True
        )
        first = results[0]
        if isinstance(first, BaseException):
            raise first

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self._everything()))

    @property
    def draining(self) -> bool:
        return self._draining

    @draining.setter
    def draining(self, value: bool) -> None:
        """Draining: every model refuses new work (503) and /readyz says so."""
        self._draining = value
        for service in self._everything():
            service.draining = value

    async def drain(self, timeout: float) -> int:
        self.draining = True
        counts = await asyncio.gather(*(s.drain(timeout) for s in self._everything()))
        return sum(counts)

    async def load(self, config: ServiceConfig) -> InferenceService:
        """Add and load a model at runtime. Its name (and its adapters') must be new; if it
        fails to load it is removed again and the error raised."""
        if is_speech_folder(config.model.path):
            raise InvalidRequest(
                "A speech-to-text (whisper) model cannot be loaded at runtime yet; list it in "
                "the models file.",
                param="path",
            )
        service = self._add(InferenceService(config))
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
        speech = self._speech.pop(name, None)
        if speech is not None:
            self._attachments.detach(name)
            cancelled = await speech.drain(timeout)
            await speech.stop()
            log.info("model %r unloaded (%d transcriptions cancelled)", name, cancelled)
            return cancelled
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
    def _everything(self) -> list[InferenceService | TranscriptionService]:
        return [*self._services.values(), *self._speech.values()]

    def _add_speech(self, service: TranscriptionService) -> None:
        if service.model_name in {m.id for m in self.served()}:
            raise InvalidRequest(f"The name {service.model_name!r} is already served.")
        service.observer = self._attachments.attach(service)  # type: ignore[assignment]
        service.draining = self._draining
        self._speech[service.model_name] = service

    def _add(self, service: InferenceService) -> InferenceService:
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

    async def _start(self, service: InferenceService | TranscriptionService) -> None:
        try:
            await service.start()
            log.info(
                "model %r ready: %s on %s", service.model_name, service.model_dir, service.device
            )
        except Exception as exc:  # its /healthz entry reports "error"; the message is here
            log.error("model %r failed to load: %s", service.model_name, exc)
            raise
