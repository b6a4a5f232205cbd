"""Time to first token of a second session that shares a long prefix with a first one, with
prefix sharing on and off, side by side in one process (the batch engine, in-process, no HTTP):
``python -m bench.benchmarks.prefix_share MODEL_DIR [--prefix 1024] [--rounds 3] [--threads 2]``.

Three ways the first session can hold the prefix when the second arrives:
- ``busy``: still decoding (the second is sent at the first one's first token);
- ``resident``: finished, its row kept (``GENAI_CACHE_SEQUENCES``);
- ``store``: finished and its row given up (no row kept): only the host-RAM store has it.
Every arm of every round gets a fresh prefix (random words, its own seed), so nothing carries
over between arms; the arms alternate, on then off, in each round.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
from pathlib import Path
from typing import Any

WORDS = (
    "river mountain city road tree bird fish water fire stone cloud wind light house door "
    "window garden bridge market field forest valley island ocean shadow story letter"
).split()
SCENARIOS = ("busy", "resident", "store")


def _config(folder: Path, threads: int, scenario: str, share: bool) -> Any:
    from backends.config import Limits, ModelConfig, ServiceConfig

    model = ModelConfig(
        folder,
        device="cpu",
        intra_op_threads=threads,
        scheduler="batch",
        cache_sequences=0 if scenario == "store" else 4,
        kv_cache_mib=512.0,
        prefix_share_min=32 if share else 0,
    )
    return ServiceConfig(model, Limits(max_concurrency=4))


async def _pair(service: Any, prefix: str, scenario: str) -> tuple[float, int, int]:
    """The second session's TTFT (s), its cached tokens and its prompt tokens."""
    from backends.core.request import GenerationRequest, TextPrompt
    from backends.types import SamplingParams

    def ask(question: str, n: int) -> GenerationRequest:
        prompt = TextPrompt(f"{prefix}\nQ: {question}\nA:")
        return GenerationRequest(prompt, SamplingParams(min_new_tokens=n), max_tokens=n)

    first = await service.submit(ask("what is the first thing?", 64 if scenario == "busy" else 4))
    if scenario == "busy":
        async for delta in first:
            if delta.token is not None:
                break
    else:
        await first.result()
    second = await (await service.submit(ask("and the second one?", 4))).result()
    if scenario == "busy":
        first.cancel()
    return second.metrics.ttft, second.usage.cached_tokens, second.usage.prompt_tokens


def _prefix(tokenizer: Any, seed: int, tokens: int) -> str:
    rng = random.Random(seed)
    words: list[str] = []
    while len(tokenizer.encode(" ".join(words))) < tokens:
        words += [rng.choice(WORDS) for _ in range(32)]
    return " ".join(words)


async def _arm(folder: Path, threads: int, scenario: str, share: bool, prefix: str) -> Any:
    from backends.core.service import InferenceService

    service = InferenceService(_config(folder, threads, scenario, share))
    await service.start()
    try:
        await _pair(service, _prefix_warmup(prefix), scenario)  # warm the kernels, other text
        return await _pair(service, prefix, scenario)
    finally:
        await service.stop()


def _prefix_warmup(prefix: str) -> str:
    return "warm up " + prefix[: len(prefix) // 4]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--prefix", type=int, default=1024, help="shared prefix, tokens")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import onnxruntime_genai as og

    tokenizer = og.Tokenizer(og.Config(str(args.model)))
    results: dict[tuple[str, bool], list[tuple[float, int, int]]] = {}
    seed = 0
    for _ in range(args.rounds):
        for scenario in SCENARIOS:
            for share in (True, False):
                seed += 1
                prefix = _prefix(tokenizer, seed, args.prefix)
                got = asyncio.run(_arm(args.model, args.threads, scenario, share, prefix))
                results.setdefault((scenario, share), []).append(got)
    print(f"{args.model.name}: second session's TTFT, {args.rounds} rounds, median")
    print("| first session | prompt tokens | sharing on: TTFT, cached | off: TTFT | on/off |")
    print("|---|---|---|---|---|")
    for scenario in SCENARIOS:
        on, off = results[(scenario, True)], results[(scenario, False)]
        t_on = statistics.median(r[0] for r in on)
        t_off = statistics.median(r[0] for r in off)
        cached = statistics.median(r[1] for r in on)
        print(
            f"| {scenario} | {on[0][2]} | {t_on * 1000:.0f} ms, {cached:.0f} "
            f"| {t_off * 1000:.0f} ms | {t_on / t_off:.2f} |"
        )


if __name__ == "__main__":
    main()
