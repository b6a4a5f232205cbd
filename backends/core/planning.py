"""From a request to sequences the scheduler can run: render, tokenize, check, plan.

Runs on the owner thread, in the one trip a request makes there (``InferenceService.submit``).
Every check that can refuse a request happens here, before any of its sequences is queued.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from backends.chat.template import TemplateSet, encode_chat, render_chat
from backends.core.request import ChatPrompt, GenerationRequest, Prompt, TextPrompt
from backends.errors import ContextLengthExceeded, InvalidRequest
from backends.models.folder import ModelFolder
from backends.models.loader import LoadedModel
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


def templates_of(folder: ModelFolder) -> TemplateSet:
    return TemplateSet(folder.chat_templates, folder.template_tokens)


def prepare_prompt(model: LoadedModel, prompt: Prompt, param: str) -> PreparedPrompt:
    folder = model.folder
    return render_and_encode(
        model.tokenizer, templates_of(folder), folder.special_tokens, prompt, param
    )


def render_and_encode(
    tokenizer: Any, templates: TemplateSet, specials: Sequence[str], prompt: Prompt, param: str
) -> PreparedPrompt:
    """The prompt's text and tokens (runs on the owner thread, or in the prompt worker)."""

    def encode(text: str) -> list[int]:
        return [int(t) for t in tokenizer.encode(text)] if text else []

    if isinstance(prompt, ChatPrompt):
        text = render_chat(templates, prompt)
        ids = encode_chat(encode, text, prompt, specials)
    else:
        text = prompt.text
        ids = encode(text)
    if not ids:
        raise InvalidRequest("The prompt is empty: it has no tokens.", param=param)
    return PreparedPrompt(text, ids)


def prompt_chars(prompt: Prompt) -> int:
    """Characters of what the client sent (the template's own text not counted)."""
    if isinstance(prompt, TextPrompt):
        return len(prompt.text)
    content = sum(len(str(m.get("content") or "")) for m in prompt.messages)
    return content + len(json.dumps(list(prompt.tools))) if prompt.tools else content


def check_prompt_size(
    request: GenerationRequest, max_length: int, max_token_chars: int | None
) -> int:
    """Refuse, before tokenizing, a prompt too long to fit the context whatever its tokens
    (more characters than ``max_length`` tokens of the longest token could hold, twice over
    for normalizers that shorten text). Returns the prompt's characters."""
    chars = sum(prompt_chars(p) for p in request.prompts)
    if max_token_chars is not None and chars > 2 * max_length * max_token_chars:
        param = request.param("prompt")
        raise ContextLengthExceeded(
            f"The prompt has {chars} characters: far more than this model's maximum context "
            f"length of {max_length} tokens can hold. Shorten the {param}.",
            param=param,
        )
    return chars


def choice_params(
    request: GenerationRequest, choice: int, max_new_tokens: int, adapter: str | None = None
) -> GenerationParams:
    """Choice ``choice``'s parameters: seeded requests give choice i the seed ``seed + i``."""
    sampling = request.sampling
    seed = None if sampling.seed is None else (sampling.seed + choice) % (SEED_MAX + 1)
    fields = {f.name: getattr(sampling, f.name) for f in dataclasses.fields(sampling)}
    return GenerationParams(
        **{**fields, "seed": seed}, max_new_tokens=max_new_tokens, adapter=adapter
    )


def check_vocabulary(model: LoadedModel, request: GenerationRequest) -> None:
    """Token ids and counts the engine would choke on, refused with the vocabulary's size."""
    vocab, sampling = model.vocab_size, request.sampling
    bad = sorted(t for t in sampling.logit_bias or () if not 0 <= int(t) < vocab)
    if bad:
        raise InvalidRequest(
            f"logit_bias names token ids outside the vocabulary (0..{vocab - 1}): {bad}",
            param=request.param("logit_bias"),
        )
    if sampling.top_k > vocab:
        raise InvalidRequest(
            f"top_k is {sampling.top_k}, more than this model's {vocab} tokens.",
            param=request.param("top_k"),
        )


MAX_GRAMMAR_CHARS = 256 * 1024  # a JSON schema, regex or grammar (forced tool calls: all tools)
_GRAMMAR_FORMATS = {"json_schema": "json_schema", "regex": "regex", "lark_grammar": "lark"}


def check_guidance(request: GenerationRequest) -> None:
    """Compile the request's grammar with llguidance before anything is queued, so a schema
    the engine cannot use is a 400 naming the field, not a failed generation. llguidance's
    own limits bound the work (nesting depth, size); this may take a while for a large
    schema and releases the GIL meanwhile, so call it off the event loop."""
    guidance = request.sampling.guidance
    if guidance is None:
        return
    kind, text = guidance
    param = request.param("guidance")
    if len(text) > MAX_GRAMMAR_CHARS:
        raise InvalidRequest(
            f"The {kind.replace('_', ' ')} is too large: {len(text)} characters, at most "
            f"{MAX_GRAMMAR_CHARS}.",
            param=param,
        )
    import llguidance

    try:
        grammar = llguidance.grammar_from(_GRAMMAR_FORMATS[kind], text)  # type: ignore[arg-type]
        problem = llguidance.LLMatcher.validate_grammar(grammar)
    except ValueError as exc:
        problem = str(exc)
    if problem:
        reason = " ".join(problem.split())[:300]
        raise InvalidRequest(f"The {kind.replace('_', ' ')} cannot be used: {reason}", param=param)


_WHAT = {"adapter": "A LoRA adapter", "num_beams": "Beam search"}


def refuse_unsupported(strategy_name: str, param: str | None, request: GenerationRequest) -> None:
    if param is not None:
        what = _WHAT.get(param, param)
        raise InvalidRequest(
            f"{what} is not supported by the {strategy_name!r} scheduler serving this model "
            "(GENAI_SCHEDULER=generator supports it).",
            param=request.param(param),
        )


def check_beams(request: GenerationRequest) -> None:
    """Beam search returns the ``n`` best of ``num_beams`` deterministic beams: what would
    change the scores of single tokens, or sample, cannot be combined with it."""
    s = request.sampling
    if s.num_beams <= 1:
        return
    beams = request.param("num_beams")
    if request.n > s.num_beams:
        raise InvalidRequest(
            f"n ({request.n}) is more than the {s.num_beams} beams searched.",
            param=request.param("beam_width"),
        )
    refused = {
        "temperature": not s.greedy,
        "guidance": s.guidance is not None,
        "logprobs": s.logprobs or s.top_logprobs > 0,
        "presence_penalty": s.presence_penalty != 0,
        "frequency_penalty": s.frequency_penalty != 0,
        "logit_bias": bool(s.logit_bias),
    }
    for field_name, used in refused.items():
        if used:
            raise InvalidRequest(
                f"{request.param(field_name)} cannot be combined with {beams}.",
                param=request.param(field_name),
            )
