"""The served models as Ollama lists them: /api/tags, /api/show and /api/ps, each read off the
loaded model's folder (backends/models/summary.py) and its chat format; an embedding model
is listed with the capability "embedding". /api/tags also lists a chat model not in memory
(declared to load on first use, pulled, or unloaded when idle) from its GenAI folder;
/api/show loads it. /api/ps lists the models in memory and says when each will be
unloaded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from backends.core.encoder_service import EncoderService
from backends.core.registry import ModelRegistry, ServedModel
from backends.core.service import InferenceService
from backends.errors import InvalidRequest, NotReady
from backends.models.folder import ModelFolder
from backends.models.sampling import SamplingDefaults
from backends.models.summary import (
    FolderSummary,
    parameter_size,
    summarize,
    summarize_encoder,
)
from schemas.ollama import (
    ListedModel,
    ListResponse,
    ModelDetails,
    ProcessResponse,
    RunningModel,
    ShowResponse,
)
from schemas.ollama.request import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P

# The Ollama release whose API this door follows (/api/version); clients compare it with
# the version a feature needs (tools, structured outputs, thinking).
OLLAMA_VERSION = "0.32.15"
NEVER = "9999-12-31T23:59:59Z"  # a model kept loaded (keep-alive -1) until it is unloaded


def _time(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class _Entry:
    """What the listings say of one loaded model, whatever its kind."""

    summary: FolderSummary
    details: ModelDetails
    context: int | None
    capabilities: list[str]
    template: str
    model_info: dict[str, Any]
    source: str  # the folder's name, for the modelfile


def _details(model: ServedModel, family: str, summary: FolderSummary) -> ModelDetails:
    return ModelDetails(
        parent_model=model.parent or "",
        family=family,
        families=[family],
        parameter_size=parameter_size(summary.parameters),
        quantization_level=summary.quantization,
    )


def _generator(model: ServedModel, service: InferenceService) -> _Entry | None:
    folder = service.folder
    if folder is None:
        return None
    summary = summarize(folder)
    context = model.max_length or folder.context_length
    found = service.chat_format
    capabilities = [
        "completion",
        *(["tools"] if found.tools is not None else []),
        *(["thinking"] if found.reasoning is not None else []),
        *(["vision"] if "image" in (service.modalities or ()) else []),
    ]
    return _Entry(
        summary,
        _details(model, folder.model_type, summary),
        context,
        capabilities,
        folder.chat_templates.get("default", ""),
        _model_info(folder, summary, context),
        folder.path.name,
    )


def _embedder(model: ServedModel, service: EncoderService) -> _Entry | None:
    spec = service.spec
    if spec is None or spec.kind != "embedding":  # Ollama's API has no rerankers
        return None
    summary = summarize_encoder(spec.folder, spec.onnx_path)
    config = _read_json(spec.folder / "config.json")
    family = str(config.get("model_type") or "encoder")
    info: dict[str, Any] = {
        "general.architecture": family,
        "general.parameter_count": summary.parameters,
        f"{family}.context_length": spec.max_length,
        f"{family}.embedding_length": service.dimensions,
        f"{family}.pooling_type": spec.pooling,
    }
    return _Entry(
        summary,
        _details(model, family, summary),
        spec.max_length,
        ["embedding"],
        "",
        {k: v for k, v in info.items() if v is not None},
        spec.folder.name,
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _entry(model: ServedModel) -> _Entry | None:
    """A loaded chat or embedding model's entry; None for the others (still loading, failed,
    or a kind Ollama's API has no room for: speech, rerankers)."""
    service = model.service
    if service.status != "ok":
        return None
    if isinstance(service, InferenceService):
        return _generator(model, service)
    if isinstance(service, EncoderService):
        return _embedder(model, service)
    return None


def _on_disk(model: ServedModel) -> tuple[FolderSummary, ModelDetails] | None:
    """A chat model not in memory, described from its folder without loading it: a GenAI
    folder (genai_config.json) only; a repo of variants or an ONNX export without one is
    described once loaded."""
    service = model.service
    if not isinstance(service, InferenceService):
        return None
    path = service.config.model.path
    config = _read_json(path / "genai_config.json")
    if not config:
        return None
    folder = ModelFolder(path, config)
    try:
        summary = summarize(folder)
    except OSError:
        return None
    return summary, _details(model, folder.model_type, summary)


def tags(models: ModelRegistry) -> ListResponse:
    """Every served chat and embedding model: a loaded one from its core, one not in memory
    (declared to load on first use, pulled, unloaded when idle) from its folder."""
    listed = []
    for model in models.served():
        entry = _entry(model)
        found = (entry.summary, entry.details) if entry is not None else _on_disk(model)
        if found is None:
            continue
        summary, details = found
        listed.append(
            ListedModel(
                name=model.id,
                model=model.id,
                modified_at=_time(summary.modified),
                size=summary.size,
                digest=summary.digest,
                details=details,
            )
        )
    return ListResponse(models=listed)


def _expires_at(models: ModelRegistry, name: str) -> str:
    """When model ``name`` is unloaded if no request comes (far ahead: never by itself)."""
    left = models.expires_in(name)
    if left is None:
        return NEVER
    return _time(datetime.now(timezone.utc) + timedelta(seconds=left))


def running(models: ModelRegistry) -> ProcessResponse:
    """The models in memory (a model declared to load on first use shows once loaded)."""
    listed = []
    for model in models.served():
        entry = _entry(model) if models.is_loaded(model.service.model_name) else None
        if entry is None:
            continue
        on_gpu = model.service.device.lower() != "cpu"
        listed.append(
            RunningModel(
                name=model.id,
                model=model.id,
                size=entry.summary.size,
                digest=entry.summary.digest,
                details=entry.details,
                expires_at=_expires_at(models, model.service.model_name),
                size_vram=entry.summary.size if on_gpu else 0,
                context_length=entry.context or 0,
            )
        )
    return ProcessResponse(models=listed)


def _model_info(folder: ModelFolder, summary: FolderSummary, context: int) -> dict[str, Any]:
    """Ollama's GGUF-style keys, from genai_config.json."""
    family = folder.model_type
    config = folder.config.get("model", {})
    decoder = config.get("decoder", {})
    info: dict[str, Any] = {
        "general.architecture": family,
        "general.parameter_count": summary.parameters,
        f"{family}.context_length": context,
        f"{family}.embedding_length": decoder.get("hidden_size"),
        f"{family}.block_count": decoder.get("num_hidden_layers"),
        f"{family}.attention.head_count": decoder.get("num_attention_heads"),
        f"{family}.attention.head_count_kv": decoder.get("num_key_value_heads"),
        f"{family}.vocab_size": config.get("vocab_size"),
    }
    return {key: value for key, value in info.items() if value is not None}


def _sampling(defaults: SamplingDefaults | None) -> str:
    """The sampling a request that sets none gets, as Modelfile parameters: the model's own,
    or (None: GENAI_SAMPLING_DEFAULTS=api) this door's."""
    if defaults is None:
        return f"temperature {DEFAULT_TEMPERATURE}\ntop_k {DEFAULT_TOP_K}\ntop_p {DEFAULT_TOP_P}\n"
    d = defaults
    penalty = f"repeat_penalty {d.repetition_penalty:g}\n" if d.repetition_penalty != 1.0 else ""
    return f"temperature {d.temperature:g}\ntop_k {d.top_k}\ntop_p {d.top_p:g}\n{penalty}"


def show(models: ModelRegistry, name: str) -> ShowResponse:
    model = models.served_model(name)  # a 404 that lists the served models
    entry = _entry(model)
    if entry is None and model.service.status == "ok":
        raise InvalidRequest(
            f"The model {name!r} is a {model.kind} model, which Ollama's API does not describe "
            "(it serves chat and embedding models).",
            param="model",
        )
    if entry is None:
        raise NotReady(f"The model {name!r} is not loaded ({model.service.status}).")
    parameters = f"num_ctx {entry.context}"
    if isinstance(model.service, InferenceService) and "completion" in entry.capabilities:
        parameters = _sampling(model.service.sampling_defaults) + parameters
    return ShowResponse(
        modelfile=f"# An ONNX model folder, served as {model.id!r}.\n"
        f"FROM {entry.source}\n" + "".join(f"PARAMETER {p}\n" for p in parameters.split("\n")),
        parameters=parameters,
        template=entry.template,
        details=entry.details,
        model_info=entry.model_info,
        capabilities=entry.capabilities,
        modified_at=_time(entry.summary.modified),
    )
