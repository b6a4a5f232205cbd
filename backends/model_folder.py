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

    @cached_property
    def tokenizer_config(self) -> dict[str, Any]:
        try:
            value = json.loads((self.path / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    @cached_property
    def chat_templates(self) -> dict[str, str]:
        """The folder's chat templates by name ("default", sometimes "tool_use"):
        chat_template.jinja, else tokenizer_config.json's chat_template (a string or a list of
        {"name", "template"})."""
        file = self.path / "chat_template.jinja"
        if file.is_file():
            return {"default": file.read_text(encoding="utf-8")}
        value = self.tokenizer_config.get("chat_template")
        if isinstance(value, str) and value.strip():
            return {"default": value}
        if isinstance(value, list):
            named = {
                str(t.get("name")): str(t.get("template"))
                for t in value
                if isinstance(t, dict) and t.get("template")
            }
            if named and "default" not in named:
                named["default"] = next(iter(named.values()))
            return named
        return {}

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_templates)

    @cached_property
    def template_tokens(self) -> dict[str, str]:
        """The special tokens a chat template may use by name (bos_token, eos_token, ...)."""
        found: dict[str, str] = {}
        for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
            value = self.tokenizer_config.get(name)
            if isinstance(value, dict):  # {"content": "<s>", ...}
                value = value.get("content")
            if isinstance(value, str):
                found[name] = value
        return found

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
    def added_tokens(self) -> dict[str, tuple[int, bool]]:
        """The tokenizer's added tokens: text -> (id, whether it is a special token)."""
        try:
            tokenizer = self.path / "tokenizer.json"
            if tokenizer.is_file():
                added = json.loads(tokenizer.read_text(encoding="utf-8")).get("added_tokens", [])
                return {t["content"]: (int(t["id"]), bool(t.get("special"))) for t in added}
            decoder = self.tokenizer_config.get("added_tokens_decoder", {})
            return {t["content"]: (int(i), bool(t.get("special"))) for i, t in decoder.items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}

    @cached_property
    def special_tokens(self) -> tuple[str, ...]:
        """The text of the tokenizer's special (control) tokens, longest first."""
        found = [text for text, (_, special) in self.added_tokens.items() if special and text]
        return tuple(sorted(found, key=len, reverse=True))


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
