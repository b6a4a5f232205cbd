"""An encoder folder (embedding model or cross-encoder reranker) read into an :class:`EncoderSpec`.

What a folder says about itself, in the order it is believed:

- a sentence-transformers folder: ``modules.json`` (a ``Normalize`` module or not),
  ``1_Pooling/config.json`` (``pooling_mode`` in v6, ``pooling_mode_*_tokens`` flags before),
  ``sentence_bert_config.json`` (``max_seq_length``), ``config_sentence_transformers.json``
  (named prompts such as ``query: ``);
- an Optimum export: ``config.json`` (the architecture: ``*ForSequenceClassification`` is a
  reranker; a decoder's ``model_type`` pools its last token) and the graph's outputs
  (``logits`` or ``last_hidden_state``);
- the models file's ``kind``, ``pooling``, ``normalize`` and ``max_length`` override all of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from backends.config import ModelConfig
from backends.errors import StartupError
from backends.models.folder import longest_token_chars

EncoderKind = Literal["embedding", "reranker"]
Pooling = Literal["mean", "cls", "last"]
KINDS: tuple[str, ...] = ("embedding", "reranker")

# Architectures whose embedding is their last token's state (Qwen3-Embedding, e5-mistral, ...).
_DECODERS = {"qwen2", "qwen3", "llama", "mistral", "gemma", "gemma2", "gemma3_text", "phi3"}
_ONNX_FILES = ("onnx/model.onnx", "model.onnx")
_HIDDEN = ("sentence_embedding", "last_hidden_state", "token_embeddings")


@dataclass(frozen=True)
class EncoderSpec:
    """Everything the encoder engine needs to know about a folder."""

    folder: Path
    kind: EncoderKind
    onnx_path: Path
    tokenizer_path: Path
    output: str  # the graph output read: hidden states, or logits for a reranker
    pooling: Pooling = "mean"
    normalize: bool = True
    max_length: int = 512
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt: str | None = None
    pad_id: int = 0
    vocab_size: int = 0
    hidden_size: int = 0
    pooled_output: bool = False  # the graph already pools (``sentence_embedding`` [B, H])
    max_token_chars: int | None = None  # the longest token's characters (None: not known)

    def max_chars(self, tokens: int) -> int | None:
        """Characters beyond which a text surely holds more than ``tokens`` tokens: no token
        stands for more than ``max_token_chars`` characters, twice over for normalizers that
        drop text (whitespace, accents, control characters). None if not known."""
        return 2 * tokens * self.max_token_chars if self.max_token_chars else None


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StartupError(f"{path} cannot be read as JSON: {exc}") from None
    return data if isinstance(data, dict) else {}


def _onnx_file(folder: Path, variant: str | None) -> Path | None:
    names = (variant,) if variant else _ONNX_FILES
    for name in names:
        if name and (folder / name).is_file():
            return folder / name
    return None


def _graph_outputs(onnx_path: Path) -> list[str]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    return [o.name for o in session.get_outputs()]


def detect_kind(folder: Path, variant: str | None = None) -> EncoderKind | None:
    """The encoder kind a folder holds, or None for a generator (or no model at all).

    Cheap: reads JSON files only; the graph is opened later, by :func:`read_encoder`."""
    if (folder / "genai_config.json").is_file():
        return None
    if (folder / "modules.json").is_file():
        return "embedding"
    architectures = _json(folder / "config.json").get("architectures") or []
    if any(str(a).endswith("ForSequenceClassification") for a in architectures):
        return "reranker"
    if any(str(a).endswith(("ForCausalLM", "ForConditionalGeneration")) for a in architectures):
        return None
    if architectures and _onnx_file(folder, variant) is not None:
        return "embedding"  # a bare *Model export: feature extraction
    return None


def serves_encoder(model: ModelConfig) -> bool:
    """Whether this model runs on the encoder engine: as the models file says, else as its
    folder says."""
    if model.kind in KINDS:
        return True
    return model.kind == "auto" and detect_kind(model.path, model.variant) is not None


def read_model_encoder(model: ModelConfig) -> EncoderSpec:
    """:func:`read_encoder` with the models file's overrides."""
    return read_encoder(
        model.path,
        kind=model.kind if model.kind in KINDS else "auto",
        pooling=model.pooling,
        normalize=model.normalize,
        max_length=model.max_length,
        variant=model.variant,
    )


def _st_pooling(folder: Path) -> tuple[Pooling | None, bool | None]:
    """Pooling and normalisation from a sentence-transformers folder (None: not said)."""
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    pooling: Pooling | None = None
    normalize = any("Normalize" in str(m.get("type", "")) for m in modules)
    for module in modules:
        if "Pooling" not in str(module.get("type", "")):
            continue
        cfg = _json(folder / module.get("path", "") / "config.json")
        mode = str(cfg.get("pooling_mode", ""))
        if cfg:
            flags = {
                "cls": cfg.get("pooling_mode_cls_token") or mode == "cls",
                "last": cfg.get("pooling_mode_lasttoken") or mode == "lasttoken",
                "mean": cfg.get("pooling_mode_mean_tokens") or mode == "mean",
            }
            chosen = [name for name, on in flags.items() if on]
            if len(chosen) != 1:
                raise StartupError(
                    f"{folder}: pooling {mode or cfg} is not supported (mean, cls or lasttoken)."
                )
            pooling = chosen[0]  # type: ignore[assignment]
    return pooling, normalize


def _max_length(folder: Path, config: dict[str, Any]) -> int:
    st = _json(folder / "sentence_bert_config.json").get("max_seq_length")
    if isinstance(st, int) and st > 0:
        return st
    tok = _json(folder / "tokenizer_config.json").get("model_max_length")
    if isinstance(tok, int) and 0 < tok < 1_000_000:
        return tok
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and positions > 0:
        # RoBERTa-family position tables start after the padding index.
        roberta = config.get("model_type") in ("roberta", "xlm-roberta")
        return positions - 2 if roberta else positions
    return 512


def _pad_id(folder: Path, config: dict[str, Any]) -> int:
    from tokenizers import Tokenizer

    pad = _json(folder / "tokenizer_config.json").get("pad_token")
    if isinstance(pad, dict):
        pad = pad.get("content")
    if isinstance(pad, str):
        found = Tokenizer.from_file(str(folder / "tokenizer.json")).token_to_id(pad)
        if found is not None:
            return int(found)
    pad_id = config.get("pad_token_id")
    return pad_id if isinstance(pad_id, int) else 0


def read_encoder(
    folder: Path,
    *,
    kind: str = "auto",
    pooling: str | None = None,
    normalize: bool | None = None,
    max_length: int | None = None,
    variant: str | None = None,
) -> EncoderSpec:
    """The folder as an encoder; StartupError says what is missing or not understood."""
    found = detect_kind(folder, variant)
    chosen = found if kind == "auto" else kind
    if chosen not in KINDS:
        raise StartupError(f"{folder} holds no embedding or reranker model.")
    onnx_path = _onnx_file(folder, variant)
    if onnx_path is None:
        wanted = variant or " or ".join(_ONNX_FILES)
        raise StartupError(f"{folder}: no ONNX graph at {wanted}.")
    if not (folder / "tokenizer.json").is_file():
        raise StartupError(f"{folder}: no tokenizer.json (the encoder reads it with tokenizers).")
    config = _json(folder / "config.json")
    outputs = _graph_outputs(onnx_path)
    st_pooling, st_normalize = (
        _st_pooling(folder) if (folder / "modules.json").is_file() else (None, None)
    )
    if chosen == "reranker":
        if "logits" not in outputs:
            raise StartupError(f"{onnx_path}: a reranker graph must output logits: {outputs}.")
        output = "logits"
    else:
        hidden = [name for name in _HIDDEN if name in outputs]
        output = hidden[0] if hidden else outputs[0]
    decoder = config.get("model_type") in _DECODERS
    st_cfg = _json(folder / "config_sentence_transformers.json")
    prompts = {str(k): str(v) for k, v in (st_cfg.get("prompts") or {}).items()}
    return EncoderSpec(
        folder=folder,
        kind=chosen,  # type: ignore[arg-type]
        onnx_path=onnx_path,
        tokenizer_path=folder / "tokenizer.json",
        output=output,
        pooling=(pooling or st_pooling or ("last" if decoder else "mean")),  # type: ignore[arg-type]
        normalize=normalize if normalize is not None else (st_normalize is not False),
        max_length=max_length or _max_length(folder, config),
        prompts=prompts,
        default_prompt=st_cfg.get("default_prompt_name") or None,
        pad_id=_pad_id(folder, config),
        vocab_size=int(config.get("vocab_size") or 0),
        hidden_size=int(config.get("hidden_size") or 0),
        pooled_output=output == "sentence_embedding",
        max_token_chars=longest_token_chars(folder / "tokenizer.json"),
    )
