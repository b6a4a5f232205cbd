"""From a request to sequences the scheduler can run: render, tokenize, check, plan.

Runs on the owner thread, in the one trip a request makes there (``InferenceService.submit``).
Every check that can refuse a request happens here, before any of its sequences is queued.
"""

from __future__ import annotations

import dataclasses

from backends.chat_template import render_chat
from backends.errors import ContextLengthExceeded, InvalidRequest
from backends.request import ChatPrompt, GenerationRequest, Prompt
from backends.runtime import LoadedModel
from backends.types import SEED_MAX, GenerationParams, PreparedPrompt


def plan_max_new_tokens(
    prompt_tokens: int,
    requested: int | None,
    default: int,
    max_length: int,
    *,
    prompt_param: str = "messages",
    tokens_param: str = "max_tokens",
) -> int:
    """How many tokens may be generated. Never truncates the prompt; refuses what cannot fit.

    An explicit ``requested`` that overflows the context is an error (the caller asked for
    something impossible); the server default is reduced to the room left instead.
    """
    room = max_length - prompt_tokens
    if room <= 0:
        raise ContextLengthExceeded(
            f"The prompt has {prompt_tokens} tokens; this model's maximum context length is "
            f"{max_length} tokens, leaving no room to generate. Shorten the {prompt_param}.",
            param=prompt_param,
        )
    if requested is None:
        return min(default, room)
    if requested > room:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {max_length} tokens. The request has "
            f"{prompt_tokens} prompt tokens and asks for {requested} new tokens "
            f"({prompt_tokens + requested} in total). Reduce {tokens_param} or the "
            f"{prompt_param}.",
            param=tokens_param,
        )
    return requested


def prepare_prompt(model: LoadedModel, prompt: Prompt, param: str) -> PreparedPrompt:
    if isinstance(prompt, ChatPrompt):
        text = render_chat(model.tokenizer, prompt, has_template=model.folder.has_chat_template)
    else:
        text = prompt.text
    ids = [int(t) for t in model.tokenizer.encode(text)]
    if not ids:
        raise InvalidRequest("The prompt is empty: it has no tokens.", param=param)
    return PreparedPrompt(text, ids)


def choice_params(request: GenerationRequest, choice: int, max_new_tokens: int) -> GenerationParams:
    """Choice ``choice``'s parameters: seeded requests give choice i the seed ``seed + i``."""
    sampling = request.sampling
    seed = None if sampling.seed is None else (sampling.seed + choice) % (SEED_MAX + 1)
    fields = {f.name: getattr(sampling, f.name) for f in dataclasses.fields(sampling)}
    return GenerationParams(**{**fields, "seed": seed}, max_new_tokens=max_new_tokens)


def check_vocabulary(model: LoadedModel, request: GenerationRequest) -> None:
    bias = request.sampling.logit_bias
    if bias:
        vocab = model.vocab_size
        bad = sorted(t for t in bias if not 0 <= int(t) < vocab)
        if bad:
            raise InvalidRequest(
                f"logit_bias names token ids outside the vocabulary (0..{vocab - 1}): {bad}",
                param=request.param("logit_bias"),
            )


def refuse_unsupported(strategy_name: str, param: str | None, request: GenerationRequest) -> None:
    if param is not None:
        raise InvalidRequest(
            f"{param} is not supported by the {strategy_name!r} scheduler serving this model "
            "(GENAI_SCHEDULER=generator supports it).",
            param=request.param(param),
        )
