"""Check a GenAI model folder before onnxruntime-genai sees it, with messages one can act on.

Besides a builder-made folder (genai_config.json at the top) it takes the layouts models come
in from the hub: a repo of variant subfolders (one is chosen for the execution provider), and
an ONNX export with no genai_config.json (one is inferred and written to a cache folder).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from backends.errors import StartupError
from backends.models.infer_config import (
    CannotInfer,
    infer_genai_config,
    read_hf_files,
)
from backends.models.inferred_folder import write_inferred_folder
from backends.models.onnx_graph import GraphReadError, read_graph_io
from backends.models.package import package_folder
from backends.models.package_manifest import is_model_package
from backends.models.sampling import SamplingDefaults, search_defaults
from backends.models.variants import (
    choose,
    file_candidate,
    find_onnx_files,
    find_variant_folders,
    folder_candidate,
)

log = logging.getLogger("genai.model")

VALID_FOLDER = (
    "A GenAI model folder holds genai_config.json, the ONNX model it names (model.onnx, "
    "often with model.onnx.data) and tokenizer files (tokenizer.json, tokenizer_config.json); "
    "a repo of such folders (one per variant), an ONNX Runtime model package (manifest.json) "
    "or a decoder-only ONNX export with past key values, config.json and tokenizer files "
    "also serve. "
    "Export one with: python main_genai.py export <hf-folder-or-id> --out <dir>"
)


def longest_token_chars(tokenizer_json: Path) -> int | None:
    """The characters of the longest entry in a tokenizer.json's vocabulary (added tokens
    included): no token stands for more characters of text. None if the file does not say."""
    try:
        data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
        vocab = data["model"]["vocab"]
        pieces = vocab.keys() if isinstance(vocab, dict) else (entry[0] for entry in vocab)
        added = (t["content"] for t in data.get("added_tokens", []))
        return max(len(str(piece)) for piece in (*pieces, *added))
    except (OSError, ValueError, TypeError, KeyError, IndexError):
        return None


@dataclass(frozen=True)
class ModelFolder:
    path: Path  # the folder onnxruntime-genai loads
    config: dict[str, Any]
    source: Path | None = None  # the folder the user named, when it is not ``path``
    origin: str = ""  # how ``path`` was found from ``source`` (variant, inferred config)

    @property
    def context_length(self) -> int:
        model = self.config.get("model", {})
        return int(model.get("context_length") or self.config.get("search", {}).get("max_length"))

    @property
    def sampling_defaults(self) -> SamplingDefaults:
        """How the model samples when a request says nothing (its config's search section)."""
        return search_defaults(self.config.get("search", {}))

    @property
    def sliding_window(self) -> int:
        """The decoder's attention window in tokens (0: none). onnxruntime's attention refuses a
        KV cache smaller than the window, however short the sequence."""
        decoder = self.config.get("model", {}).get("decoder", {})
        return int((decoder.get("sliding_window") or {}).get("window_size") or 0)

    def kv_capacity(self, needed: int) -> int:
        """A KV cache length for ``needed`` tokens that the attention op accepts: at least the
        sliding window (within the context), whatever the sequence's own limit, which still
        ends it."""
        return max(needed, min(self.sliding_window, self.context_length))

    @cached_property
    def last_logits_only(self) -> bool:
        """Whether the decoder computes the logits of the last position it is fed only (its
        logits output is ``[batch, 1, vocab]``: the builder's ``prune_lm_head``, what
        ``main_genai.py export`` makes for the CPU unless ``--all-logits``), not of every
        position. Read off the graph, not the folder's name; False where it cannot be read
        (loading the model then says why)."""
        decoder = self.config.get("model", {}).get("decoder", {})
        name = (decoder.get("outputs") or {}).get("logits", "logits")
        try:
            logits = read_graph_io(self.path / str(decoder.get("filename"))).output(name)
        except GraphReadError:
            return False
        shape = logits.shape if logits is not None else None
        return shape is not None and len(shape) == 3 and shape[1] == 1

    @property
    def model_type(self) -> str:
        return str(self.config.get("model", {}).get("type", "unknown"))

    @property
    def modalities(self) -> tuple[str, ...]:
        """What the model reads: text, and images when genai_config.json names a vision
        stage (and its processor config), audio when it names a speech stage."""
        model = self.config.get("model", {})
        found = ["text"]
        vision = model.get("vision")
        if isinstance(vision, dict) and vision.get("filename"):
            found.append("image")
        speech = model.get("speech")
        if isinstance(speech, dict) and speech.get("filename"):
            found.append("audio")
        return tuple(found)

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
        return longest_token_chars(self.path / "tokenizer.json")

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


def inspect_model_folder(
    path: Path,
    *,
    provider: str | None = None,
    variant: str | None = None,
    cache_dir: Path | None = None,
) -> ModelFolder:
    """Validate the folder; raise :class:`StartupError` naming the missing piece.

    ``path`` may also be a repo of variant subfolders (the one for ``provider`` is chosen,
    or the one ``variant`` names) or an ONNX export without genai_config.json (one is inferred
    into ``cache_dir``). ``provider`` is the execution provider's device name (``cpu``,
    ``cuda``, ...); None: the one ``auto`` picks."""
    if not path.exists():
        raise StartupError(f"Model directory {path} does not exist. {VALID_FOLDER}")
    if not path.is_dir():
        raise StartupError(f"Model path {path} is not a directory. {VALID_FOLDER}")
    if (path / "genai_config.json").is_file():
        if variant:
            log.warning("GENAI_MODEL_VARIANT=%s ignored: %s has a genai_config.json", variant, path)
        return _inspect_genai_folder(path)
    if is_model_package(path):  # NAME.ortpackage: its variant for the provider, laid out
        packages = cache_dir / "packages" if cache_dir else None
        folder_path, origin = package_folder(path, provider or _auto_provider(), variant, packages)
        return replace(_inspect_genai_folder(folder_path), source=path, origin=origin)
    folders = find_variant_folders(path)
    if folders:
        candidates = [folder_candidate(path, f) for f in folders]
        chosen, why = choose(candidates, provider or _auto_provider(), variant, path, "variants")
        log.info("model variant %s in %s: %s", chosen.rel, path, why)
        folder = _inspect_genai_folder(path / chosen.rel)
        return replace(folder, source=path, origin=f"variant {chosen.rel} ({why})")
    files = find_onnx_files(path)
    if files:
        return _infer_folder(path, files, provider, variant, cache_dir)
    raise StartupError(
        f"{path} has no genai_config.json, no variant subfolder with one, and no ONNX model "
        f"(*.onnx or onnx/*.onnx) to infer one from. {VALID_FOLDER}"
    )


def _auto_provider() -> str:
    """The provider ``auto`` picks, for callers that did not say (no import, no accelerator:
    CPU)."""
    from backends.models.providers import detect_available, select_provider

    try:
        import onnxruntime_genai as og
    except ImportError:
        return "cpu"
    return select_provider("auto", detect_available(og)).name


_NOT_DECODERS = ("encoder", "vision", "audio", "embed_tokens", "speech")


def _infer_folder(
    path: Path,
    files: list[Path],
    provider: str | None,
    variant: str | None,
    cache_dir: Path | None,
) -> ModelFolder:
    def refuse(why: str) -> StartupError:
        return StartupError(
            f"{path} has no genai_config.json, and none can be inferred: {why}. {VALID_FOLDER}"
        )

    parts = [f for f in files if any(word in f.stem.lower() for word in _NOT_DECODERS)]
    if parts:
        names = ", ".join(f.relative_to(path).as_posix() for f in parts)
        kind = (
            "an encoder-decoder"
            if any("encoder" in f.stem.lower() for f in parts)
            else "a multi-part"
        )
        raise refuse(
            f"it holds {kind} model ({names}); only decoder-only language models are served "
            "from an export without genai_config.json"
        )
    candidates = [file_candidate(path, f) for f in files]
    chosen, why = choose(candidates, provider or _auto_provider(), variant, path, "ONNX files")
    model_file = path / chosen.rel
    # The Hugging Face files sit at the top of the repo (transformers.js) or beside the model.
    hf_dir = path
    if not any((path / n).is_file() for n in ("config.json", "tokenizer.json")):
        hf_dir = model_file.parent
    try:
        hf = read_hf_files(hf_dir)
        graph = read_graph_io(model_file)
        config = infer_genai_config(graph, hf, chosen.rel)
        folder_path, reused = write_inferred_folder(hf_dir, model_file, config, cache_dir)
    except GraphReadError as exc:
        raise refuse(f"{chosen.rel} is not a readable ONNX model ({exc})") from None
    except CannotInfer as exc:
        raise refuse(str(exc)) from None
    log.info(
        "%s has no genai_config.json: serving %s (%s); config inferred from its graph and %s, "
        "%s %s",
        path,
        chosen.rel,
        why,
        ", ".join(hf.present) or "no Hugging Face files",
        "reusing" if reused else "written to",
        folder_path,
    )
    folder = _inspect_genai_folder(folder_path)
    origin = f"{chosen.rel} with an inferred genai_config.json in {folder_path} ({why})"
    return replace(folder, source=path, origin=origin)


def _inspect_genai_folder(path: Path) -> ModelFolder:
    """A folder with a genai_config.json: the files it names are there and it parses."""
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
