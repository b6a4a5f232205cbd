"""Check a GenAI model folder before onnxruntime-genai sees it, with messages one can act on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from backends.errors import StartupError

VALID_FOLDER = (
    "A GenAI model folder holds genai_config.json, the ONNX model it names (model.onnx, "
    "often with model.onnx.data) and tokenizer files (tokenizer.json, tokenizer_config.json). "
    "Export one with: python -m onnxruntime_genai.models.builder -m <hf-model> -o <dir> "
    "-p int4 -e cpu"
)


@dataclass(frozen=True)
class ModelFolder:
    path: Path
    config: dict[str, Any]

    @property
    def context_length(self) -> int:
        model = self.config.get("model", {})
        return int(model.get("context_length") or self.config.get("search", {}).get("max_length"))

    @property
    def model_type(self) -> str:
        return str(self.config.get("model", {}).get("type", "unknown"))

    @property
    def chat_template_path(self) -> Path | None:
        p = self.path / "chat_template.jinja"
        return p if p.is_file() else None

    def tokenizer_chat_template(self) -> str | None:
        """A template embedded in tokenizer_config.json, if the folder has one."""
        cfg = self.path / "tokenizer_config.json"
        if not cfg.is_file():
            return None
        try:
            value = json.loads(cfg.read_text(encoding="utf-8")).get("chat_template")
        except (OSError, ValueError):
            return None
        return value if isinstance(value, str) and value.strip() else None

    @cached_property
    def max_token_chars(self) -> int | None:
        """The most characters one token can stand for (its longest vocabulary entry), or None
        if tokenizer.json does not say. A text longer than max_length times this cannot fit
        the context, whatever it tokenizes to."""
        try:
            data = json.loads((self.path / "tokenizer.json").read_text(encoding="utf-8"))
            vocab = data["model"]["vocab"]
            pieces = vocab.keys() if isinstance(vocab, dict) else (entry[0] for entry in vocab)
            added = (t["content"] for t in data.get("added_tokens", []))
            return max(len(str(piece)) for piece in (*pieces, *added))
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            return None

    @cached_property
    def special_tokens(self) -> tuple[str, ...]:
        """The text of the tokenizer's special (control) tokens, longest first."""
        found: set[str] = set()
        tokenizer = self.path / "tokenizer.json"
        config = self.path / "tokenizer_config.json"
        try:
            if tokenizer.is_file():
                added = json.loads(tokenizer.read_text(encoding="utf-8")).get("added_tokens", [])
                found = {t["content"] for t in added if t.get("special") and t.get("content")}
            elif config.is_file():
                decoder = json.loads(config.read_text(encoding="utf-8")).get(
                    "added_tokens_decoder", {}
                )
                found = {t["content"] for t in decoder.values() if t.get("special")}
        except (OSError, ValueError, TypeError, KeyError):
            pass
        return tuple(sorted(found, key=len, reverse=True))

    @cached_property
    def has_chat_template(self) -> bool:
        # Read once: prepare_chat asks on every request.
        return self.chat_template_path is not None or self.tokenizer_chat_template() is not None


def inspect_model_folder(path: Path) -> ModelFolder:
    """Validate the folder; raise :class:`StartupError` naming the missing piece."""
    if not path.exists():
        raise StartupError(f"Model directory {path} does not exist. {VALID_FOLDER}")
    if not path.is_dir():
        raise StartupError(f"Model path {path} is not a directory. {VALID_FOLDER}")
    cfg_path = path / "genai_config.json"
    if not cfg_path.is_file():
        raise StartupError(f"{path} has no genai_config.json. {VALID_FOLDER}")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise StartupError(f"{cfg_path} is not valid JSON: {exc}") from None
    decoder = config.get("model", {}).get("decoder", {})
    filename = decoder.get("filename")
    if not filename:
        raise StartupError(
            f"{cfg_path} names no model file (model.decoder.filename). {VALID_FOLDER}"
        )
    if not (path / filename).is_file():
        raise StartupError(
            f"{path} is missing the model file {filename} named by genai_config.json. "
            f"{VALID_FOLDER}"
        )
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer.model").is_file():
        raise StartupError(
            f"{path} has no tokenizer (tokenizer.json or tokenizer.model). {VALID_FOLDER}"
        )
    folder = ModelFolder(path=path, config=config)
    try:
        folder.context_length  # noqa: B018 - validates presence and type
    except (TypeError, ValueError):
        raise StartupError(f"{cfg_path} has no model.context_length.") from None
    return folder
