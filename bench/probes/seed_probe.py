"""Issue 17's three seed scenarios on any model folder, through the core (no HTTP):
``python -m bench.probes.seed_probe MODEL_DIR [batch|generator] [temperature]``. Prints, for each,
whether the seeded (or greedy, temperature 0) request gave the same text both ways:

- twice in a row on an idle server, the second run reusing the first one's prefix;
- alone, and beside three other requests in flight;
- as the choices of one ``n=3`` request, and as three requests with ``seed + i``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.request import ChatPrompt, GenerationRequest
from backends.core.service import InferenceService
from backends.types import SamplingParams

TEXT = "Write a short story about a lighthouse keeper who finds a message in a bottle. " * 2
SEED, LENGTH = 11, 32


def request(text: str, temperature: float, seed: int = SEED, n: int = 1) -> GenerationRequest:
    sampling = SamplingParams(temperature=temperature, seed=seed, min_new_tokens=LENGTH)
    prompt = ChatPrompt([{"role": "user", "content": text}])
    return GenerationRequest(prompt, sampling, max_tokens=LENGTH, n=n)


async def texts(service: InferenceService, req: GenerationRequest) -> list[str]:
    result = await (await service.submit(req)).result()
    return [c.text for c in result.choices]


def main(folder: Path, scheduler: str, temperature: float) -> None:
    config = ServiceConfig(
        ModelConfig(folder, device="cpu", scheduler=scheduler, cache_sequences=4), Limits()
    )

    def served(body: Any) -> Any:
        async def run() -> Any:
            service = InferenceService(config)
            await service.start()
            try:
                return await body(service)
            finally:
                await service.stop()

        return asyncio.run(run())

    async def twice(s: InferenceService) -> bool:
        return await texts(s, request(TEXT, temperature)) == await texts(
            s, request(TEXT, temperature)
        )

    async def alone(s: InferenceService) -> list[str]:
        return await texts(s, request(TEXT, temperature))

    async def in_company(s: InferenceService) -> list[str]:
        others = [
            await s.submit(request(f"other {i} " * (5 + 7 * i), 0.8, seed=i)) for i in range(3)
        ]
        mine = await texts(s, request(TEXT, temperature))
        await asyncio.gather(*(h.result() for h in others))
        return mine

    async def n_choices(s: InferenceService) -> bool:
        together = await texts(s, request(TEXT, temperature, n=3))
        apart = [(await texts(s, request(TEXT, temperature, seed=SEED + i)))[0] for i in range(3)]
        return together == apart

    def say(name: str, same: bool) -> None:
        print(f"{scheduler}, temperature {temperature}: {name}: {'same' if same else 'DIFFERENT'}")

    say("twice, prefix reused", served(twice))
    say("alone vs beside 3 others", served(alone) == served(in_company))
    say("n=3 vs seed+i", served(n_choices))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        Path(args[0]),
        args[1] if len(args) > 1 else "batch",
        float(args[2] if len(args) > 2 else 0.9),
    )
