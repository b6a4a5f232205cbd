"""The core's tests on the real demo model share these: the strategies, a service config, running
a body against a started service, and building requests and reading results."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from backends.config import Limits, ModelConfig, ServiceConfig
from backends.core.handle import Result
from backends.core.request import ChatPrompt, GenerationRequest, TextPrompt
from backends.core.service import InferenceService
from backends.types import SamplingParams
from config.settings import DEMO_MODEL_DIR

STRATEGIES = ["generator", "engine", "batch"]
FULL = ["generator", "batch"]  # the strategies with the whole sampling surface
MODEL_FIELDS = (
    "scheduler",
    "cache_sequences",
    "prefill_chunk",
    "prefix_share_min",
    "speculative_tokens",
)
EOS = 2  # the demo model's eos_token_id


def config(**kw: Any) -> ServiceConfig:
    model = {k: kw.pop(k) for k in MODEL_FIELDS if k in kw}
    return ServiceConfig(
        ModelConfig(DEMO_MODEL_DIR, device="cpu", intra_op_threads=1, **model), Limits(**kw)
    )


def run(cfg: ServiceConfig, body: Callable[[InferenceService], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        service = InferenceService(cfg)
        await service.start()
        try:
            return await body(service)
        finally:
            await service.stop()

    return asyncio.run(main())


def request(prompt: Any, max_tokens: int | None = 16, **kw: Any) -> GenerationRequest:
    sampling = {k: kw.pop(k) for k in list(kw) if k in SamplingParams.__dataclass_fields__}
    if isinstance(prompt, str):
        prompt = TextPrompt(prompt)
    elif isinstance(prompt, list) and isinstance(prompt[0], dict):
        prompt = ChatPrompt(prompt)
    return GenerationRequest(prompt, SamplingParams(**sampling), max_tokens=max_tokens, **kw)


async def chat(service: InferenceService, messages, **kw: Any) -> Result:
    handle = await service.submit(request(messages, **kw))
    return await handle.result()


def text(result: Result) -> str:
    return result.choices[0].text


def user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]
