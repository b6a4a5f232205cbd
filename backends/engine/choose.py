"""Which strategy runs a model's sequences: as configured, or for ``auto`` by what the model
and its device allow. Called on the owner thread once the model is loaded."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import astuple

from backends.config import ModelConfig, SchedulerName
from backends.engine import last_logits
from backends.engine.kv_events import KVEventSink
from backends.engine.scheduler import Strategy
from backends.errors import StartupError
from backends.models.loader import LoadedModel
from backends.types import PrefixStoreStats, Speculative

log = logging.getLogger("genai.scheduler")


def auto_strategy(model: LoadedModel) -> SchedulerName:
    """``auto``: the Engine's continuous batching where the model has it (paged attention on
    an accelerator); on the CPU our own continuous batching (``batch``, which falls back to
    the generator for a graph it does not understand); the generator for LoRA adapters and
    images, which only it handles, and for the rest."""
    if model.adapter_files or "image" in model.modalities:
        return "generator"  # only og.Generator applies adapters and reads images
    if model.dynamic_batching:
        return "engine"
    return "batch" if model.provider.name == "cpu" else "generator"


def paged_refusal(model: LoadedModel, name: str, chosen: bool) -> str:
    """Why a paged-attention model cannot run on ``name``: og.Generator (and our batch engine)
    feed a graph its unpacked ``input_ids``, which a paged graph refuses at the first token
    ("Invalid rank for input: input_ids"; seen on CUDA with onnxruntime-genai 0.18)."""
    paged = (
        "this model is built with paged attention (engine.dynamic_batching in its "
        "genai_config.json), which only onnxruntime-genai's Engine runs"
    )
    if chosen:
        return f"GENAI_SCHEDULER={name} cannot serve it: {paged}. Use auto or engine."
    needs = "LoRA adapters" if model.adapter_files else "Images"
    return (
        f"{needs} need og.Generator, but {paged}: build the model without "
        "use_paged_attention to serve them."
    )


def strategy_factory(
    config: ModelConfig,
    slots: int,
    store_stats: PrefixStoreStats | None = None,
    kv_events: KVEventSink | None = None,
    workers: int = 1,
) -> Callable[[LoadedModel], Strategy]:
    """The strategy for ``config``'s scheduler setting, made once the model is loaded;
    ``slots`` is how many sequences may run at once; the batch strategy's prefix store
    counts into ``store_stats``, and it tells the blocks it holds to ``kv_events``; an
    automatic KV budget is split among ``workers`` processes."""

    def make(model: LoadedModel) -> Strategy:
        name, chosen = config.scheduler, config.scheduler != "auto"
        if name == "auto":
            name = auto_strategy(model)
        if model.dynamic_batching and name != "engine":
            raise StartupError(paged_refusal(model, name, chosen))
        if name == "engine" and (why := last_logits.engine_refusal(model.folder)):
            raise StartupError(why)
        own = {s: config.speculative(s) for s in ("batch", "generator")}
        asked = config.speculative_tokens is not None
        speculative = last_logits.server_speculation(model.folder, own, asked=asked)
        if name == "batch":
            from backends.engine.batch.build import create_batch
            from backends.engine.batch.decoder import UnsupportedModel
            from backends.engine.batch.speculation import Speculation
            from backends.engine.fallback import WithFallback

            try:
                batch = create_batch(
                    model,
                    slots=slots,
                    prefill_chunk=config.prefill_chunk,
                    step_tokens=config.step_tokens,
                    overlap=config.prefill_overlap,
                    cache_size=config.cache_sequences,
                    kv_budget_mib=config.kv_cache_mib,
                    workers=workers,
                    store_mib=config.prefix_store_mib,
                    share_min=config.prefix_share_min,
                    store_stats=store_stats,
                    kv_events=kv_events,
                    speculation=Speculation(*astuple(speculative["batch"])),
                    logit_noise=config.logit_noise,
                )
                # Beam search and adapters, which batch cannot do, go to a generator.
                return WithFallback(batch, lambda: generator(model, speculative["generator"]))
            except UnsupportedModel as exc:
                log.log(
                    logging.WARNING if chosen else logging.INFO,
                    "batch scheduler: cannot serve this model (%s); using generator",
                    exc,
                )
                name = "generator"
        if name == "engine":
            from backends.engine.og_engine import EngineStrategy

            return EngineStrategy(model, cache_size=config.cache_sequences, slots=slots)
        return generator(model, speculative["generator"])

    def generator(model: LoadedModel, speculative: Speculative) -> Strategy:
        from backends.engine.generator import GeneratorStrategy

        return GeneratorStrategy(
            model,
            prefill_chunk=config.prefill_chunk,
            cache_size=config.cache_sequences,
            slots=slots,
            speculative=speculative,
        )

    return make
