"""The batch strategy for a model: its onnxruntime sessions (a second one with half the
threads for overlapped prefill), its KV cache reserved, the prefix store and the KV-event
ledger (:mod:`backends.engine.batch.strategy`)."""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from backends.engine.batch.block_ledger import BlockLedger
from backends.engine.batch.decoder import Decoder, UnsupportedModel, read_spec, session_options
from backends.engine.batch.kv_budget import auto_budget_mib, describe, usable_memory
from backends.engine.batch.kv_cache import MIB, KVCache, capacity_for
from backends.engine.batch.prefix_store import BLOCK_TOKENS, PrefixStore
from backends.engine.batch.sharing import SHARE_MIN
from backends.engine.batch.speculation import Speculation
from backends.engine.batch.strategy import BatchStrategy
from backends.engine.kv_events import KVEventSink
from backends.models.loader import LoadedModel
from backends.types import PrefixStoreStats

log = logging.getLogger("genai.batch")


def create_batch(
    model: LoadedModel,
    *,
    slots: int,
    prefill_chunk: int = 256,
    step_tokens: int = 0,
    overlap: bool | str = False,
    cache_size: int = 4,
    kv_budget_mib: float | Literal["auto"] | None = None,
    workers: int = 1,
    store_mib: float = 0.0,
    share_min: int = SHARE_MIN,
    store_stats: PrefixStoreStats | None = None,
    kv_events: KVEventSink | None = None,
    speculation: Speculation | None = None,
    logit_noise: float = 0.0,
) -> BatchStrategy:
    """The strategy for ``model``, or :class:`UnsupportedModel` saying why not;
    ``kv_events``: where it tells the blocks its KV cache holds (with sharing on: only
    then may another prompt use them); ``kv_budget_mib="auto"``: a share of the memory this
    process may use, split among ``workers`` processes (:mod:`.kv_budget`)."""
    if model.provider.name != "cpu":
        raise UnsupportedModel(f"it runs on the CPU only, not {model.provider.name}")
    if not (model.folder.path / "tokenizer.json").is_file():
        raise UnsupportedModel("constrained decoding needs tokenizer.json")
    import onnxruntime as ort

    decoder_cfg = model.folder.config["model"]["decoder"]
    path = str(model.folder.path / decoder_cfg["filename"])

    def make_session(profile_prefix: str | None = None, threads: int = model.threads) -> Any:
        options = session_options(ort, model.folder, threads)
        if profile_prefix is not None:
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    session = make_session()
    half = make_session(threads=model.threads // 2) if overlap and model.threads > 1 else None
    spec = read_spec(model.folder, {i.name: i.type for i in session.get_inputs()})
    if kv_budget_mib == "auto":
        memory = usable_memory()
        kv_budget_mib = auto_budget_mib(memory, workers)
        log.info(
            "batch scheduler: KV budget %.0f MiB, %s", kv_budget_mib, describe(memory, workers)
        )
    # at least a sliding window, whatever the budget; a sequence still ends at max_length
    capacity = model.folder.kv_capacity(capacity_for(spec, slots, model.max_length, kv_budget_mib))
    started = time.perf_counter()
    kv = KVCache(spec, slots, capacity, ort)
    log.info(
        "batch scheduler: %d slots x %d tokens; KV cache %.1f MiB reserved in %.1f s "
        "(%.1f KiB per token, %.1f MiB per slot)",
        slots,
        capacity,
        kv.nbytes / MIB,
        time.perf_counter() - started,
        spec.bytes_per_token / 1024,
        kv.nbytes / slots / MIB,
    )
    ledger = None
    if kv_events is not None and share_min > 0:
        ledger = BlockLedger(BLOCK_TOKENS, kv_events)
    store = None
    if store_mib > 0 and share_min > 0:
        size = int(store_mib * MIB)
        store = PrefixStore(size, spec.bytes_per_token, stats=store_stats, listener=ledger)
    return BatchStrategy(
        model,
        Decoder(spec, session, ort, noise=logit_noise),
        kv,
        prefill_chunk=prefill_chunk,
        step_tokens=step_tokens,
        overlap=overlap,
        cache_size=cache_size,
        make_session=make_session,
        store=store,
        share_min=share_min,
        overlap_decoder=None if half is None else Decoder(spec, half, ort, noise=logit_noise),
        ledger=ledger,
        speculation=speculation,
    )
