"""A genai_config.json for an ONNX decoder that came without one (Optimum, transformers.js and
other community exports), inferred from the graph and the Hugging Face files beside it.

The graph says what onnxruntime-genai must feed and read: ``input_ids``, ``attention_mask``,
optionally ``position_ids``, one ``past_key_values.N.key/value`` pair per layer in, ``logits``
and ``present.N.key/value`` out; the KV heads and head size come from the past tensors' shapes
``[batch, kv_heads, past_length, head_size]``. config.json, generation_config.json and the
tokenizer files give the rest (context length, EOS/BOS/pad ids). What cannot be inferred is
refused with a message naming what is missing.

The result is written to a cache folder, never into the model folder (which may be
read-only): :mod:`backends.models.inferred_folder`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.models.onnx_graph import GraphIO, TensorInfo

log = logging.getLogger("genai.model")


# The tokenizer and Hugging Face files copied next to the inferred genai_config.json.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "config.json",
    "generation_config.json",
)
LINK_NAME = "onnx"  # in the cache folder: a link to the folder that holds the ONNX file

# Inputs that mark a model onnxruntime-genai's decoder-only loop cannot run, and why.
_ENCODER_INPUTS = ("encoder_hidden_states", "encoder_attention_mask", "encoder_outputs")
_MULTIMODAL_INPUTS = ("pixel_values", "input_features", "image_features", "audio_values")
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
_KV_DTYPES = ("float", "float16", "bfloat16")


class CannotInfer(Exception):
    """The folder's model cannot be served without a genai_config.json; says what is missing."""


@dataclass(frozen=True)
class HFFiles:
    """What the Hugging Face files beside the model say (empty where a file is absent)."""

    config: dict[str, Any] = field(default_factory=dict)  # config.json
    generation: dict[str, Any] = field(default_factory=dict)  # generation_config.json
    tokenizer_config: dict[str, Any] = field(default_factory=dict)
    token_ids: dict[str, int] = field(default_factory=dict)  # token text -> id (tokenizer.json)
    has_tokenizer: bool = False
    present: tuple[str, ...] = ()  # which of the files exist, for messages

    @property
    def text_config(self) -> dict[str, Any]:
        """config.json's language-model part (multi-modal configs nest it)."""
        nested = self.config.get("text_config")
        return nested if isinstance(nested, dict) else self.config


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CannotInfer(f"{path} is not readable JSON: {exc}") from None
    return value if isinstance(value, dict) else {}


def _token_ids(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        vocab = data.get("model", {}).get("vocab", {})
        ids: dict[str, int] = {}
        if isinstance(vocab, dict):
            ids.update({str(k): int(v) for k, v in vocab.items()})
        elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
            ids.update({str(entry[0]): i for i, entry in enumerate(vocab)})
        ids.update({str(t["content"]): int(t["id"]) for t in data.get("added_tokens", [])})
        return ids
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return {}


def read_hf_files(folder: Path) -> HFFiles:
    names = ("config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json")
    return HFFiles(
        config=read_json(folder / "config.json"),
        generation=read_json(folder / "generation_config.json"),
        tokenizer_config=read_json(folder / "tokenizer_config.json"),
        token_ids=_token_ids(folder / "tokenizer.json"),
        has_tokenizer=(folder / "tokenizer.json").is_file()
        or (folder / "tokenizer.model").is_file(),
        present=tuple(n for n in names if (folder / n).is_file()),
    )


def _kv_templates(tensors: tuple[TensorInfo, ...]) -> dict[str, list[str]]:
    """Per-layer tensor names grouped by their name with the layer index replaced by ``%d``:
    {"past_key_values.%d.key": [...], ...}, keeping only names that look like a KV cache."""
    groups: dict[str, list[str]] = {}
    for t in tensors:
        if re.search(r"\d", t.name) and re.search(r"key|value|past|present", t.name):
            groups.setdefault(re.sub(r"\d+", "%d", t.name, count=1), []).append(t.name)
    return groups


def _kind(template: str) -> str | None:
    """Whether a per-layer name is a key or a value: what the name says after the layer index
    (past_key_values.%d.key), else before it (past_key_%d)."""
    before, after = template.split("%d", 1)
    for text in (after, before.replace("key_values", "")):
        found: list[str] = re.findall(r"key|value", text)
        if found:
            return found[-1]
    return None


def _pick_kv(groups: dict[str, list[str]], kind: str, role: str) -> str | None:
    found = [t for t in groups if _kind(t) == kind]
    if len(found) > 1:
        raise CannotInfer(f"several {role} {kind} name patterns in the graph: {sorted(found)}")
    return found[0] if found else None


def _layers(template: str, names: list[str]) -> int:
    count = len(names)
    if sorted(names) != sorted(template % i for i in range(count)):
        raise CannotInfer(f"the graph's {template} tensors are not numbered 0..{count - 1}")
    return count


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return int(value[0])
    return None


def _token_id(hf: HFFiles, key: str) -> list[int]:
    """An id (or ids, for EOS) from generation_config.json, config.json, or the tokenizer's
    special token of that name."""
    for source in (hf.generation, hf.text_config, hf.config):
        value = source.get(f"{key}_id")
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            return [int(v) for v in value]
    token = hf.tokenizer_config.get(key)
    if isinstance(token, dict):
        token = token.get("content")
    if isinstance(token, str) and token in hf.token_ids:
        return [hf.token_ids[token]]
    return []


def _context_length(hf: HFFiles) -> int | None:
    for source in (hf.text_config, hf.config):
        for key in _CONTEXT_KEYS:
            value = _int(source.get(key))
            if value and value > 0:
                return value
    value = _int(hf.tokenizer_config.get("model_max_length"))
    if value and 0 < value < 10_000_000:  # tokenizers write 1e30 for "no limit"
        return value
    return None


def _refuse_unsupported(graph: GraphIO, hf: HFFiles, model_name: str) -> None:
    names = {t.name for t in graph.inputs}
    if hf.config.get("is_encoder_decoder") or names & set(_ENCODER_INPUTS):
        why = (
            "config.json says is_encoder_decoder"
            if hf.config.get("is_encoder_decoder")
            else f"{model_name} takes {sorted(names & set(_ENCODER_INPUTS))}"
        )
        raise CannotInfer(
            f"an encoder-decoder model ({why}): only decoder-only language models can be "
            "served from an ONNX export without genai_config.json"
        )
    if names & set(_MULTIMODAL_INPUTS):
        raise CannotInfer(
            f"{model_name} takes {sorted(names & set(_MULTIMODAL_INPUTS))}: a multi-modal "
            "model, which needs a genai_config.json from the onnxruntime-genai builder"
        )
    if "input_ids" not in names:
        split = "inputs_embeds" in names
        why = " (it takes inputs_embeds: a decoder split from its embedding model)" if split else ""
        raise CannotInfer(f"{model_name} has no input_ids input{why}")
    if "use_cache_branch" in names:
        raise CannotInfer(
            f"{model_name} is a merged decoder (input use_cache_branch), which onnxruntime-genai "
            "cannot drive; export a single model with past key values instead (Optimum: "
            "--task text-generation-with-past, or python main_genai.py export)"
        )


def infer_genai_config(graph: GraphIO, hf: HFFiles, filename: str) -> dict[str, Any]:
    """genai_config.json for the decoder ``filename`` (as the model folder names it; in the
    config it is found through the cache folder's link), or :class:`CannotInfer` naming what
    is missing."""
    _refuse_unsupported(graph, hf, filename)
    past, present = _kv_templates(graph.inputs), _kv_templates(graph.outputs)
    past_key, past_value = _pick_kv(past, "key", "past"), _pick_kv(past, "value", "past")
    if past_key is None or past_value is None:
        raise CannotInfer(
            f"{filename} has no past key/value inputs (past_key_values.N.key / .value): it was "
            "exported without its KV cache. Export it with past key values (Optimum: --task "
            "text-generation-with-past, or python main_genai.py export)"
        )
    present_key = _pick_kv(present, "key", "present")
    present_value = _pick_kv(present, "value", "present")
    if present_key is None or present_value is None:
        raise CannotInfer(
            f"{filename} has past key/value inputs but no present.N.key/value outputs"
        )
    layers = _layers(past_key, past[past_key])
    for template, names in (
        (past_value, past[past_value]),
        (present_key, present[present_key]),
        (present_value, present[present_value]),
    ):
        if _layers(template, names) != layers:
            raise CannotInfer(f"{filename}: {len(names)} {template} tensors for {layers} layers")

    known = {"input_ids", "attention_mask", "position_ids"}
    known |= set(past[past_key]) | set(past[past_value])
    unknown = sorted(t.name for t in graph.inputs if t.name not in known)
    if unknown:
        raise CannotInfer(f"{filename} has inputs onnxruntime-genai does not feed: {unknown}")
    if graph.input("attention_mask") is None:
        raise CannotInfer(f"{filename} has no attention_mask input")
    if graph.output("logits") is None:
        raise CannotInfer(f"{filename} has no logits output")

    missing: list[str] = []
    kv = graph.input(past_key % 0)
    assert kv is not None
    if kv.dtype not in _KV_DTYPES:
        raise CannotInfer(f"{filename}: KV cache of type {kv.dtype} is not supported")
    shape = kv.shape or ()
    cfg = hf.text_config
    heads = _int(cfg.get("num_attention_heads"))
    hidden = _int(cfg.get("hidden_size"))
    kv_heads = shape[1] if len(shape) == 4 and isinstance(shape[1], int) else None
    kv_heads = kv_heads or _int(cfg.get("num_key_value_heads")) or heads
    head_size = shape[3] if len(shape) == 4 and isinstance(shape[3], int) else None
    head_size = head_size or _int(cfg.get("head_dim"))
    if head_size is None and hidden and heads:
        head_size = hidden // heads
    if kv_heads is None:
        missing.append("the KV heads (past tensor dim 1, or config.json num_key_value_heads)")
    if head_size is None:
        missing.append("the head size (past tensor dim 3, or config.json head_dim)")
    logits = graph.output("logits")
    assert logits is not None
    vocab = logits.shape[-1] if logits.shape and isinstance(logits.shape[-1], int) else None
    vocab = vocab or _int(cfg.get("vocab_size"))
    if vocab is None:
        missing.append("the vocabulary size (logits dim 2, or config.json vocab_size)")
    context = _context_length(hf)
    if context is None:
        missing.append(
            "the context length (config.json max_position_embeddings, or tokenizer_config.json "
            "model_max_length)"
        )
    eos = _token_id(hf, "eos_token")
    if not eos:
        missing.append(
            "the EOS token id (generation_config.json or config.json eos_token_id, or "
            "tokenizer_config.json eos_token)"
        )
    if not hf.has_tokenizer:
        missing.append("a tokenizer (tokenizer.json or tokenizer.model)")
    if missing:
        raise CannotInfer(f"cannot infer {'; '.join(missing)}")

    pad = _token_id(hf, "pad_token") or eos
    bos = _token_id(hf, "bos_token") or pad
    decoder: dict[str, Any] = {
        "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
        "filename": f"{LINK_NAME}/{Path(filename).name}",
        "head_size": head_size,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "inputs": {
            "input_ids": "input_ids",
            "attention_mask": "attention_mask",
            **({"position_ids": "position_ids"} if graph.input("position_ids") else {}),
            "past_key_names": past_key,
            "past_value_names": past_value,
        },
        "outputs": {
            "logits": "logits",
            "present_key_names": present_key,
            "present_value_names": present_value,
        },
    }
    if heads:
        decoder["num_attention_heads"] = heads
    if hidden:
        decoder["hidden_size"] = hidden
    return {
        "model": {
            # The generic decoder-only type: the graph itself does the architecture's work.
            "type": "decoder",
            "bos_token_id": bos[0],
            "eos_token_id": eos if len(eos) > 1 else eos[0],
            "pad_token_id": pad[0],
            "context_length": context,
            "vocab_size": vocab,
            "decoder": decoder,
        },
        "search": {
            "max_length": context,
            # Optimum's graphs concatenate past and new keys into present: the buffers differ.
            "past_present_share_buffer": False,
            "do_sample": False,
            "num_beams": 1,
        },
    }
