"""The served models as Ollama lists them: /api/tags, /api/show and /api/ps, each read off the
loaded model's folder (backends/models/summary.py) and its chat format. A model still loading
(or that failed to load) is not listed; /api/show names it as not loaded."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from backends.core.registry import ModelRegistry, ServedModel
from backends.core.service import InferenceService
from backends.errors import NotReady
from backends.models.folder import ModelFolder
from backends.models.summary import FolderSummary, parameter_size, summarize
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
NEVER = "9999-12-31T23:59:59Z"  # a model stays loaded until it is unloaded


def _time(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _loaded(model: ServedModel) -> tuple[ModelFolder, FolderSummary] | None:
    """A loaded chat model's folder and summary; None for the others (Ollama's API has no
    speech models, so a Whisper is not listed here)."""
    if not isinstance(model.service, InferenceService):
        return None
    folder = model.service.folder
    if folder is None or model.service.status != "ok":
        return None
    return folder, summarize(folder)


def capabilities(model: ServedModel) -> list[str]:
    assert isinstance(model.service, InferenceService)  # only listed models are shown
    found = model.service.chat_format
    return [
        "completion",
        *(["tools"] if found.tools is not None else []),
        *(["thinking"] if found.reasoning is not None else []),
    ]


def details(model: ServedModel, folder: ModelFolder, summary: FolderSummary) -> ModelDetails:
    family = folder.model_type
    return ModelDetails(
        parent_model=model.parent or "",
        family=family,
        families=[family],
        parameter_size=parameter_size(summary.parameters),
        quantization_level=summary.quantization,
    )


def tags(models: ModelRegistry) -> ListResponse:
    listed = []
    for model in models.served():
        loaded = _loaded(model)
        if loaded is None:
            continue
        folder, summary = loaded
        listed.append(
            ListedModel(
                name=model.id,
                model=model.id,
                modified_at=_time(summary.modified),
                size=summary.size,
                digest=summary.digest,
                details=details(model, folder, summary),
            )
        )
    return ListResponse(models=listed)


def running(models: ModelRegistry) -> ProcessResponse:
    listed = []
    for model in models.served():
        loaded = _loaded(model)
        if loaded is None:
            continue
        folder, summary = loaded
        on_gpu = model.service.device.lower() != "cpu"
        listed.append(
            RunningModel(
                name=model.id,
                model=model.id,
                size=summary.size,
                digest=summary.digest,
                details=details(model, folder, summary),
                expires_at=NEVER,
                size_vram=summary.size if on_gpu else 0,
                context_length=model.max_length or folder.context_length,
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


def show(models: ModelRegistry, name: str) -> ShowResponse:
    model = models.served_model(name)  # a 404 that lists the served models
    loaded = _loaded(model)
    if loaded is None:
        raise NotReady(f"The model {name!r} is not loaded ({model.service.status}).")
    folder, summary = loaded
    context = model.max_length or folder.context_length
    parameters = (
        f"temperature {DEFAULT_TEMPERATURE}\ntop_k {DEFAULT_TOP_K}\ntop_p {DEFAULT_TOP_P}\n"
        f"num_ctx {context}"
    )
    return ShowResponse(
        modelfile=f"# An ONNX Runtime GenAI model folder, served as {model.id!r}.\n"
        f"FROM {folder.path.name}\n" + "".join(f"PARAMETER {p}\n" for p in parameters.split("\n")),
        parameters=parameters,
        template=folder.chat_templates.get("default", ""),
        details=details(model, folder, summary),
        model_info=_model_info(folder, summary, context),
        capabilities=capabilities(model),
        modified_at=_time(summary.modified),
    )
