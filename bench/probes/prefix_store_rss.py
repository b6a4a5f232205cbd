"""The process's peak memory with the prefix store filled: the batch engine on the default KV
cache and store sizes, no row kept, so each finished session's ~1k-token prompt goes to the
store; enough sessions overfill it. ``python -m bench.probes.prefix_store_rss MODEL_DIR [--sessions
13]``. What sizes ``GENAI_PREFIX_STORE_MIB``'s default (docs/prefix-sharing.md)."""

from __future__ import annotations

import argparse
import asyncio
import resource
from pathlib import Path


async def _run(folder: Path, sessions: int) -> None:
    from backends.config import Limits, ModelConfig, ServiceConfig
    from backends.core.request import GenerationRequest, TextPrompt
    from backends.core.service import InferenceService

    model = ModelConfig(
        folder, device="cpu", intra_op_threads=2, scheduler="batch", cache_sequences=0
    )
    service = InferenceService(ServiceConfig(model, Limits()))
    await service.start()
    try:
        for i in range(sessions):
            prompt = TextPrompt(f"session {i} " + "river mountain city road tree " * 200)
            await (await service.submit(GenerationRequest(prompt, max_tokens=2))).result()
        await asyncio.sleep(0.5)  # the last row goes to the store just after its last token
        store = service.stats().prefix_store
    finally:
        await service.stop()
    assert store is not None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{folder.name}: KV cache {model.kv_cache_mib} MiB, store {model.prefix_store_mib} MiB")
    held = store.bytes / 2**20
    print(f"  store holds {held:.1f} MiB in {store.blocks} blocks, {store.evictions} evicted")
    print(f"  peak RSS {peak:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--sessions", type=int, default=13)
    args = parser.parse_args()
    asyncio.run(_run(args.model, args.sessions))


if __name__ == "__main__":
    main()
