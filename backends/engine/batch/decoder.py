"""The model folder's decoder as a plain onnxruntime session, and whether we understand it.

The builder's CPU decoder takes ``input_ids [B, S]``, ``attention_mask [B, T]`` (int64),
optionally ``position_ids [B, S]``, and one past key/value pair per layer
``[B, kv_heads, capacity, head_size]`` whose buffer is shared with the present output
(``past_present_share_buffer``). Its ``GroupQueryAttention`` derives each row's past length
from its mask row, so rows of different lengths run together (a ragged batch). Names and
shapes come from genai_config.json; the session's own inputs are checked against them.

An int8 KV cache (``main_genai.py export --kv-cache int8``) is bound the same way: its scales
are constants in the graph, and the attention op quantizes what it writes into the shared
buffer. The builder itself marks such a CPU model ``past_present_share_buffer: false`` (the
export marks it shared: modelkit/kv_quant.py), but onnxruntime's CPU GroupQueryAttention shares
whenever past and present are one buffer, int8 included, so either folder is served.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from backends.models.folder import ModelFolder

log = logging.getLogger("genai.batch")

Int64s = npt.NDArray[np.int64]

NOISE_SEED = 48  # GENAI_LOGIT_NOISE: the same draws in every run
# onnxruntime's element types for the KV cache. int8: quantized, its scales in the graph (int4
# packs two values a byte, which the buffers here cannot hold).
_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int8)": np.int8}
_QUANTIZED = ("tensor(int8)",)


class UnsupportedModel(Exception):
    """The batch strategy cannot run this model; the message says why."""


@dataclass(frozen=True)
class DecoderSpec:
    """What the batch engine needs to know about a decoder graph."""

    path: str
    layers: int
    kv_heads: int
    head_size: int
    vocab_size: int
    input_ids: str
    attention_mask: str
    position_ids: str | None
    past_keys: tuple[str, ...]
    past_values: tuple[str, ...]
    present_keys: tuple[str, ...]
    present_values: tuple[str, ...]
    logits: str
    kv_dtype: Any  # np.float32, np.float16 or np.int8
    # The logits of the last fed position only ([B, 1, vocab]: the builder's prune_lm_head).
    # It is the last of input_ids' columns, so no run may feed rows of different lengths,
    # right-padded, together: the strategy feeds a prompt's chunk one row at a time and
    # decode steps one token a row.
    last_logits_only: bool = False

    @property
    def bytes_per_token(self) -> int:
        """KV cache bytes one token takes in one sequence (every layer, key and value)."""
        itemsize = int(np.dtype(self.kv_dtype).itemsize)
        return 2 * self.layers * self.kv_heads * self.head_size * itemsize


def _names(template: Any, layers: int, what: str) -> tuple[str, ...]:
    if not isinstance(template, str) or "%d" not in template:
        raise UnsupportedModel(f"genai_config.json has no per-layer {what} names")
    return tuple(template % i for i in range(layers))


def read_spec(folder: ModelFolder, session_inputs: dict[str, str]) -> DecoderSpec:
    """The decoder spec from genai_config.json, checked against the session's inputs
    (name → onnxruntime type). Raises :class:`UnsupportedModel` with the reason."""
    model = folder.config.get("model", {})
    decoder = model.get("decoder", {})
    if decoder.get("pipeline") or model.get("vision") or model.get("speech"):
        raise UnsupportedModel("multi-part and multi-modal models are not supported")
    inputs, outputs = decoder.get("inputs", {}), decoder.get("outputs", {})
    try:
        layers = int(decoder["num_hidden_layers"])
        kv_heads = int(decoder["num_key_value_heads"])
        head_size = int(decoder["head_size"])
        vocab = int(model["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UnsupportedModel(f"genai_config.json lacks {exc}") from None
    spec = DecoderSpec(
        path=str(folder.path / decoder["filename"]),
        layers=layers,
        kv_heads=kv_heads,
        head_size=head_size,
        vocab_size=vocab,
        input_ids=inputs.get("input_ids", "input_ids"),
        attention_mask=inputs.get("attention_mask", "attention_mask"),
        position_ids=inputs.get("position_ids") if "position_ids" in session_inputs else None,
        past_keys=_names(inputs.get("past_key_names"), layers, "past key"),
        past_values=_names(inputs.get("past_value_names"), layers, "past value"),
        present_keys=_names(outputs.get("present_key_names"), layers, "present key"),
        present_values=_names(outputs.get("present_value_names"), layers, "present value"),
        logits=outputs.get("logits", "logits"),
        kv_dtype=np.float32,
        last_logits_only=folder.last_logits_only,
    )
    known = {spec.input_ids, spec.attention_mask, *spec.past_keys, *spec.past_values}
    if spec.position_ids is not None:
        known.add(spec.position_ids)
    unknown = sorted(set(session_inputs) - known)
    if unknown:
        raise UnsupportedModel(f"the graph has inputs the batch engine does not feed: {unknown}")
    missing = sorted(known - set(session_inputs))
    if missing:
        raise UnsupportedModel(f"the graph lacks inputs genai_config.json names: {missing}")
    kv_type = session_inputs[spec.past_keys[0]]
    if kv_type not in _DTYPES:
        raise UnsupportedModel(f"KV cache type {kv_type} is not supported")
    shared = folder.config.get("search", {}).get("past_present_share_buffer", False)
    if not shared and kv_type not in _QUANTIZED:
        raise UnsupportedModel("the KV cache is not shared between past and present")
    return DecoderSpec(**{**spec.__dict__, "kv_dtype": _DTYPES[kv_type]})


def session_options(ort: Any, folder: ModelFolder, threads: int) -> Any:
    """onnxruntime SessionOptions equal to what onnxruntime-genai applies for this folder:
    genai_config.json's decoder session_options, with our intra-op thread count."""
    options = ort.SessionOptions()
    configured = folder.config["model"]["decoder"].get("session_options", {})
    for key, value in configured.items():
        if key in ("intra_op_num_threads", "inter_op_num_threads", "log_severity_level"):
            setattr(options, key, int(value))
        elif key in ("enable_cpu_mem_arena", "enable_mem_pattern"):
            setattr(options, key, bool(value))
        elif "." in key:  # a session config entry, e.g. session.intra_op.allow_spinning
            options.add_session_config_entry(key, str(value))
    options.intra_op_num_threads = threads
    return options


class Decoder:
    """Runs the decoder on rows ``[lo, hi)`` of a slot KV cache, bound in place.

    The cache rows are bound once per row range (an IOBinding each, kept): a step rebinds only
    its inputs and the logits.

    ``noise`` (testing: ``GENAI_LOGIT_NOISE``) moves every logit a run returns by a uniform
    draw in ``[-noise/2, noise/2]`` from a generator seeded once, so the gap between two tokens
    moves by up to ``noise``: what another CPU kind's kernels do to a near-tie, on this one."""

    def __init__(self, spec: DecoderSpec, session: Any, ort: Any, noise: float = 0.0) -> None:
        self.spec = spec
        self._session = session
        self._ort = ort
        self._bindings: dict[tuple[int, int], Any] = {}
        self._noise = noise
        self._rng = np.random.default_rng(NOISE_SEED)

    @property
    def session(self) -> Any:
        return self._session

    @session.setter
    def session(self, session: Any) -> None:
        self._session = session
        self._bindings.clear()

    def _binding(self, kv: Any, rows: tuple[int, int]) -> Any:
        binding = self._bindings.get(rows)
        if binding is None:
            spec, binding = self.spec, self._session.io_binding()
            binding.bind_output(spec.logits)  # first: rebinding it keeps its place, index 0
            for layer in range(spec.layers):
                key, value = kv.ortvalues(layer, rows)
                binding.bind_ortvalue_input(spec.past_keys[layer], key)
                binding.bind_ortvalue_output(spec.present_keys[layer], key)
                binding.bind_ortvalue_input(spec.past_values[layer], value)
                binding.bind_ortvalue_output(spec.present_values[layer], value)
            self._bindings[rows] = binding
        return binding

    def run(
        self,
        input_ids: Int64s,
        attention_mask: Int64s,
        position_ids: Int64s | None,
        kv: Any,
        rows: tuple[int, int],
    ) -> npt.NDArray[np.float32]:
        """Logits ``[B, S, vocab]`` for ``input_ids [B, S]`` (``[B, 1, vocab]``, the last
        position's, on a model with those only); the new keys and values are written into the
        cache rows in place. The GIL is released while the model runs."""
        rows_fed, fed = input_ids.shape
        if self.spec.last_logits_only and rows_fed > 1 and fed > 1:
            raise ValueError(
                f"{rows_fed} rows of {fed} tokens in one run on a model with the last "
                "position's logits only: a shorter row's last position would be padding"
            )
        spec, binding = self.spec, self._binding(kv, rows)
        binding.bind_cpu_input(spec.input_ids, input_ids)
        binding.bind_cpu_input(spec.attention_mask, attention_mask)
        if spec.position_ids is not None:
            assert position_ids is not None
            binding.bind_cpu_input(spec.position_ids, position_ids)
        binding.bind_output(spec.logits)
        self._session.run_with_iobinding(binding)
        logits: npt.NDArray[np.float32] = binding.get_outputs()[0].numpy()
        if self._noise:
            half = self._noise / 2
            logits = logits + self._rng.uniform(-half, half, logits.shape).astype(np.float32)
        return logits
