"""The copy model's weights and where a run starts: the Llama config of a shape, the special
tokens' ids, a run's first weights (``--shape`` from random init, ``--base``'s, or an earlier
run's), and ``weights.bin``, the compact file a run writes (modelkit/copy_model/train.py)."""

from __future__ import annotations

import io
import json
import math
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelkit.chat_template import CHAT_TEMPLATE
from modelkit.shapes import SHAPES
from modelkit.tokenizer import CHATML_SPECIAL

SHAPE = SHAPES["smollm2-135m"]
MAX_TOKENS = 1024  # longer turns are dropped
BASE_CONTEXT = 4096  # a model made from a --base: its context (its turns are far shorter)


def model_config(vocab: dict[str, int], shape: dict[str, Any] = SHAPE) -> Any:
    from transformers import LlamaConfig

    defaults = {"tie_word_embeddings": True, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
    return LlamaConfig(**(defaults | shape), initializer_range=0.02, **vocab)


def special_ids(tok_dir: Path) -> dict[str, int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    ids: dict[str, int] = {}
    for token in CHATML_SPECIAL:
        found = tok.token_to_id(token)
        if found is None:
            raise SystemExit(f"the tokenizer has no {token}")
        ids[token] = found
    return {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }


@dataclass
class Start:
    """What a run starts from: the model's shape (``LlamaConfig`` arguments), its chat
    template, the longest turn it trains on, and its first weights (None: random init)."""

    shape: dict[str, Any]
    template: str
    longest: int
    state: dict[str, Any] | None


def start(shape_name: str, layers: int | None, base: Path | None, init: Path | None) -> Start:
    """Shape ``shape_name`` (with ``layers`` layers, if given) from random init, or ``base``'s
    weights, sizes and template (its turns within its sliding window, if it has one);
    ``init`` then goes on from an earlier run's weights (with a fresh optimizer)."""
    state = unpack(init.read_bytes()) if init else None
    if base is None:
        shape: dict[str, Any] = dict(SHAPES[shape_name])
        if layers:
            shape["num_hidden_layers"] = layers
        return Start(shape, CHAT_TEMPLATE, MAX_TOKENS, state)
    import torch

    from modelkit.onnx_weights import read_decoder

    shape, weights = read_decoder(base)
    shape["max_position_embeddings"] = min(shape["max_position_embeddings"], BASE_CONTEXT)
    decoder = json.loads((base / "genai_config.json").read_text())["model"]["decoder"]
    window = decoder.get("sliding_window", {}).get("window_size") or MAX_TOKENS
    if state is None:
        state = {name: torch.from_numpy(w) for name, w in weights.items()}
    template = (base / "chat_template.jinja").read_text()
    return Start(shape, template, min(window, MAX_TOKENS), state)


def load(model: Any, state: dict[str, Any]) -> None:
    """``state`` into ``model`` (its head tied to the embedding if it has none of its own)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if m != "lm_head.weight"]:
        raise SystemExit(f"the weights do not fit: missing {missing}, unexpected {unexpected}")
    model.tie_weights()


def pack(state: dict[str, Any]) -> bytes:
    """Matrices as int8 with a float32 scale per row, vectors as float32; zlib-compressed."""
    import numpy as np

    buf = io.BytesIO()
    for name, tensor in state.items():
        a = tensor.numpy().astype(np.float32)
        head = name.encode()
        buf.write(struct.pack("<H", len(head)) + head + struct.pack("<B", a.ndim))
        buf.write(struct.pack(f"<{a.ndim}I", *a.shape))
        if a.ndim == 2:
            scale = np.maximum(np.abs(a).max(axis=1), 1e-12) / 127.0
            q = np.clip(np.rint(a / scale[:, None]), -127, 127).astype(np.int8)
            buf.write(scale.astype("<f4").tobytes() + q.tobytes())
        else:
            buf.write(a.astype("<f4").tobytes())
    return zlib.compress(buf.getvalue(), 6)


def unpack(blob: bytes) -> dict[str, Any]:
    import numpy as np
    import torch

    raw = memoryview(zlib.decompress(blob))
    at, out = 0, {}
    while at < len(raw):
        (n,) = struct.unpack_from("<H", raw, at)
        name = bytes(raw[at + 2 : at + 2 + n]).decode()
        at += 2 + n
        (ndim,) = struct.unpack_from("<B", raw, at)
        shape = struct.unpack_from(f"<{ndim}I", raw, at + 1)
        at += 1 + 4 * ndim
        if ndim == 2:
            rows, cols = shape
            scale = np.frombuffer(raw, "<f4", rows, at)
            q = np.frombuffer(raw, np.int8, rows * cols, at + 4 * rows).reshape(rows, cols)
            at += 4 * rows + rows * cols
            out[name] = torch.from_numpy(q.astype(np.float32) * scale[:, None])
        else:
            count = math.prod(shape)
            out[name] = torch.from_numpy(np.frombuffer(raw, "<f4", count, at).copy().reshape(shape))
            at += 4 * count
    return out
