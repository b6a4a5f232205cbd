"""The models file (``GENAI_MODELS_FILE``): several models, each with its own settings.

TOML or JSON; relative paths are relative to the file. A field a model leaves out takes the
server-wide model setting (``GENAI_DEVICE``, ``GENAI_SCHEDULER``, ...)::

    [[models]]
    name = "demo"
    path = "models/demo-llama"
    scheduler = "generator"
    adapters = { demo-pirate = "adapters/pirate.onnx_adapter" }

    [[models]]
    name = "demo-batch"
    path = "models/demo-llama"
    scheduler = "batch"

    [[models]]
    name = "embedder"
    path = "models/my-embedder"   # a sentence-transformers or Optimum ONNX folder
    kind = "embedding"            # read off the folder if unset, like pooling and normalize
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from backends.config import ModelConfig, hub_source
from config.settings import SETTING_OF, ModelSettings, Settings, SettingsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# What an entry must give; every other field may be left out (None: the server-wide setting).
REQUIRED = ("name", "path")
DESCRIPTIONS = {
    "name": "The id requests name it by.",
    "path": "The model folder.",
    "variant": "In a hub-layout folder: the variant subfolder or ONNX file.",
    "adapters": "LoRA adapters: served name -> .onnx_adapter file.",
    "max_inputs": "Inputs one request may hold.",
    "batch_tokens": "Padded tokens per encoder batch.",
    "batch_wait_ms": "How long an encoder batch waits for requests on their way.",
}


class _Entry(BaseModel):
    """What every entry has and does; :data:`ModelEntry` adds the fields."""

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:  # what mypy needs to see; the fields themselves come from ModelConfig
        name: str
        path: Path
        adapters: dict[str, Path]

        def __init__(self, **fields: Any) -> None: ...

    def names(self) -> list[str]:
        return [self.name, *self.adapters]

    def resolved(self, base: Path) -> _Entry:
        """Paths made absolute against ``base`` (the models file's folder); a hub repo
        (``hf:ORG/REPO``) is fetched when the server starts (backends/models/hub.py)."""
        return self.model_copy(
            update={
                "path": self.path if hub_source(self.path) else base / self.path,  # hf:ORG/REPO
                "adapters": {name: base / file for name, file in self.adapters.items()},
            }
        )


def _entry_fields() -> dict[str, Any]:
    """ModelConfig's fields, with its types and bounds, as an entry's: name first (as it is
    written), the required ones required, the others unset by default."""
    hints = get_type_hints(ModelConfig, include_extras=True)
    names = [f.name for f in dataclasses.fields(ModelConfig)]
    fields: dict[str, Any] = {}
    for name in sorted(names, key=lambda n: n != "name"):
        description = DESCRIPTIONS.get(name)
        if name in REQUIRED:
            fields[name] = (hints[name], Field(..., description=description))
        elif name == "adapters":
            fields[name] = (dict[str, Path], Field(default_factory=dict, description=description))
        else:
            fields[name] = (hints[name] | None, Field(None, description=description))
    return fields


if TYPE_CHECKING:
    ModelEntry = _Entry
else:
    ModelEntry = create_model(
        "ModelEntry",
        __base__=_Entry,
        __doc__="One served model. Unset fields take the server-wide model settings.",
        __module__=__name__,
        **_entry_fields(),
    )


class ModelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: list[ModelEntry] = Field(..., min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> ModelsFile:
        seen: set[str] = set()
        for entry in self.models:
            for name in entry.names():
                if name in seen:
                    raise ValueError(f"the name {name!r} is used twice")
                seen.add(name)
        return self


def read_models_file(path: Path) -> ModelsFile:
    """The models file at ``path``, paths resolved; ValueError says what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the models file {path}: {exc.strerror}") from None
    try:
        data: Any = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"the models file {path} is not valid {path.suffix[1:]}: {exc}") from None
    try:
        parsed = ModelsFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"the models file {path} is invalid: {problems}") from None
    base = path.resolve().parent
    return ModelsFile(models=[entry.resolved(base) for entry in parsed.models])


def model_fields(model: ModelSettings, entry: ModelEntry | None = None) -> dict[str, Any]:
    """One model's settings as plain values, named as the core's ``ModelConfig`` names them:
    the model settings, overridden by what a models-file entry sets. The encoder fields and
    the adapters are set per model in the models file; a lone model reads them off its folder
    (ModelConfig's defaults)."""
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(ModelConfig):
        setting = SETTING_OF.get(field.name, field.name)
        if setting in ModelSettings.model_fields:
            fields[field.name] = getattr(model, setting)
        elif field.default_factory is not dataclasses.MISSING:
            fields[field.name] = field.default_factory()
        else:
            fields[field.name] = field.default
    if entry is not None:
        fields.update(entry.model_dump(exclude_none=True))
    return fields


def served_model_fields(settings: Settings) -> list[dict[str, Any]]:
    """Every served model's fields (:func:`model_fields`): the models file's entries, or the
    single model of the model settings. SettingsError for a models file that cannot be read."""
    path = settings.model.models_file
    if path is None:
        return [model_fields(settings.model)]
    try:
        entries = read_models_file(path).models
    except ValueError as exc:
        raise SettingsError(str(exc)[0].upper() + str(exc)[1:]) from None
    return [model_fields(settings.model, entry) for entry in entries]
