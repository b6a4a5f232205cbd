"""From a request to sequences the scheduler can run: check, plan, make the jobs.

The checks that need no tokens run on the event loop as the request arrives; the rest run on
the owner thread, in the one trip a request makes there (:func:`plan_jobs`), after its prompts
are rendered and tokenized. Every check that can refuse a request runs before any of its
sequences is queued.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from backends.chat.formats import ChatFormat
from backends.chat.prompts import prompt_chars
from backends.chat.tools import plan_tools
from backends.config import Limits
from backends.core.grammar_check import held_tool, usable_grammar
from backends.core.handle import RequestHandle
from backends.core.request import GenerationRequest
from backends.engine.scheduler import WINDOW_BEAMS, Job, Refusal, Strategy
from backends.errors import ContextLengthExceeded, Field, InvalidRequest
from backends.models.loader import LoadedModel
from backends.models.sampling import SamplingDefaults
from backends.text import check_text
from backends.types import (
    SEED_MAX,
    ChatPrompt,
    GenerationParams,
    PreparedPrompt,
    TextPrompt,
    TokenPrompt,
)


def plan_max_new_tokens(
    prompt_tokens: int,
    requested: int | None,
    default: int,
    max_length: int,
    *,
    fit: bool = False,
    model_length: int | None = None,
) -> int:
    """How many tokens may be generated. Never truncates the prompt; refuses what cannot fit.

    An explicit ``requested`` that overflows the context is an error (the caller asked for
    something impossible) unless ``fit``; the server default is reduced to the room left.
    ``model_length``: the model's own context, where the server holds fewer tokens a sequence
    (``max_length``, what its KV cache budget gives a slot): the refusal then names the setting.
    """
    prompt, tokens = Field("prompt"), Field("max_tokens")
    room = max_length - prompt_tokens
    if room <= 0:
        raise ContextLengthExceeded(
            [
                f"The prompt has {prompt_tokens} tokens; {_limit(max_length, model_length)}, "
                "leaving no room to generate. Shorten the ",
                prompt,
                ".",
            ],
            param=prompt,
        )
    if requested is None:
        return min(default, room)
    if fit:
        return min(requested, room)
    if requested > room:
        raise ContextLengthExceeded(
            [
                f"{_limit(max_length, model_length, first=True)}. The request has "
                f"{prompt_tokens} prompt tokens and asks for {requested} new tokens "
                f"({prompt_tokens + requested} in total). Reduce ",
                tokens,
                " or the ",
                prompt,
                ".",
            ],
            param=tokens,
        )
    return requested


def _limit(max_length: int, model_length: int | None, first: bool = False) -> str:
    """What bounds a sequence: the model's context, or the slot the KV budget gives it (as
    the ``first`` words of a sentence, or within one)."""
    this = "This" if first else "this"
    if model_length is None or model_length <= max_length:
        return f"{this} model's maximum context length is {max_length} tokens"
    return (
        f"{this} server holds at most {max_length} tokens a sequence, of the model's "
        f"{model_length} (raise GENAI_KV_CACHE_MIB, its KV cache budget, or lower "
        "GENAI_MAX_CONCURRENCY, its slots, to hold more)"
    )


def check_prompt_text(request: GenerationRequest) -> None:
    """Refuse text the model's tokenizer cannot read (:mod:`backends.text`), naming the field:
    a prompt's text, a chat's messages, tools and template variables, the stop strings. Every
    door's text enters the core here, before anything is rendered or tokenized."""
    param = Field("prompt")
    for prompt in request.prompts:
        if isinstance(prompt, TextPrompt):
            check_text(prompt.text, param, nul=True)
            continue
        if isinstance(prompt, TokenPrompt):
            continue  # ids: checked against the model's vocabulary (check_prompt_ids)
        assert isinstance(prompt, ChatPrompt)
        for message in prompt.messages:
            role = str(message.get("role") or "a")
            check_text(message, param, nul=True, within=f"a {role} message's")
        check_text(prompt.tools, Field("tools"), nul=True, within="tool")
        check_text(prompt.template_args, Field("template_args"), nul=True)
    check_text(list(request.stop), Field("stop"), nul=True, within="stop string")


def check_prompt_ids(request: GenerationRequest, vocab_size: int) -> None:
    """Refuse a token-id prompt with an id outside the model's vocabulary, naming where it
    stands (``prompt[j]``, or ``prompt[i][j]`` among several prompts)."""
    prompts = request.prompts
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, TokenPrompt):
            continue
        bad = next((j for j, t in enumerate(prompt.ids) if not 0 <= t < vocab_size), None)
        if bad is not None:
            param = Field("prompt")
            where = f"[{i}][{bad}]" if len(prompts) > 1 else f"[{bad}]"
            raise InvalidRequest(
                [param, f"{where} is {prompt.ids[bad]}, not a token id of this model (its "
                 f"vocabulary is 0 to {vocab_size - 1})."],
                param=param,
            )  # fmt: skip


def check_prompt_size(
    request: GenerationRequest,
    max_length: int,
    max_token_chars: int | None,
    model_length: int | None = None,
) -> int:
    """Refuse, before tokenizing, a prompt too long to fit the context whatever its tokens
    (more characters than ``max_length`` tokens of the longest token could hold, twice over
    for normalizers that shorten text). Returns the prompt's characters."""
    chars = sum(prompt_chars(p) for p in request.prompts)
    if max_token_chars is not None and chars > 2 * max_length * max_token_chars:
        param = Field("prompt")
        raise ContextLengthExceeded(
            [
                f"The prompt has {chars} characters: far more than {max_length} tokens can "
                f"hold ({_limit(max_length, model_length)}). Shorten the ",
                param,
                ".",
            ],
            param=param,
        )
    return chars


def own_transcripts(request: GenerationRequest, names: Collection[str]) -> GenerationRequest:
    """The request without an earlier turn's tokens that another model wrote (one not among
    ``names``: they mean nothing to this tokenizer): its chat is then tokenized whole."""
    chat = request.chat
    if chat is None or chat.continues is None or chat.continues.model in names:
        return request
    return dataclasses.replace(request, prompt=dataclasses.replace(chat, continues=None))


def with_model_defaults(
    request: GenerationRequest, defaults: SamplingDefaults
) -> GenerationRequest:
    """The request with the model's own sampling where the client set none (vLLM's
    ``--generation-config auto``). Beam search keeps its own: it samples nothing."""
    if not request.unset or request.sampling.num_beams > 1:
        return request
    filled = {name: getattr(defaults, name) for name in request.unset}
    sampling = dataclasses.replace(request.sampling, **filled)
    return dataclasses.replace(request, sampling=sampling, unset=frozenset())


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
            param=Field("logit_bias"),
        )
    if sampling.top_k > vocab:
        raise InvalidRequest(
            f"top_k is {sampling.top_k}, more than this model's {vocab} tokens.",
            param=Field("top_k"),
        )


_WHAT = {"adapter": "A LoRA adapter", "num_beams": "Beam search"}


def refuse_unsupported(
    strategy_name: str, param: str | Refusal | None, request: GenerationRequest
) -> None:
    if isinstance(param, Refusal):
        name = Field(param.param)
        raise InvalidRequest([name, f": {param.why}"], param=name)
    if param == WINDOW_BEAMS:
        raise InvalidRequest(
            "Beam search is not supported on this model: onnxruntime-genai's beam search fails "
            "on sliding-window attention layers.",
            param=Field("num_beams"),
        )
    if param is not None:
        what = _WHAT.get(param, param)
        raise InvalidRequest(
            f"{what} is not supported by the {strategy_name!r} scheduler serving this model "
            "(GENAI_SCHEDULER=generator supports it).",
            param=Field(param),
        )


def refuse_images(strategy: Strategy, params: GenerationParams, request: GenerationRequest) -> None:
    """Images run on og.Generator (``generator``), one sequence each: not on another
    scheduler, and not with beam search."""
    if strategy.name != "generator":
        raise InvalidRequest(
            f"Images are not supported by the {strategy.name!r} scheduler serving this model "
            "(GENAI_SCHEDULER=generator or auto supports them).",
            param=Field("prompt"),
        )
    if params.num_beams > 1:
        raise InvalidRequest(
            "Beam search cannot be combined with images.", param=Field("num_beams")
        )
    if params.speculative is not None and params.speculative.asks:
        raise InvalidRequest(
            "n-gram speculation cannot be combined with images (onnxruntime-genai's n-gram "
            "runs plain text decoders only).",
            param=Field("speculative"),
        )


def check_beams(request: GenerationRequest) -> None:
    """Beam search returns the ``n`` best of ``num_beams`` deterministic beams: what would
    change the scores of single tokens, or sample, cannot be combined with it."""
    s = request.sampling
    if s.num_beams <= 1:
        return
    beams = Field("num_beams")
    if request.n > s.num_beams:
        raise InvalidRequest(
            f"n ({request.n}) is more than the {s.num_beams} beams searched.",
            param=Field("beam_width"),
        )
    refused = {
        "temperature": not s.greedy,
        "min_p": s.min_p > 0,
        request.guidance_field: s.guidance is not None,
        "logprobs": s.logprobs or s.top_logprobs > 0,
        "presence_penalty": s.presence_penalty != 0,
        "frequency_penalty": s.frequency_penalty != 0,
        "logit_bias": bool(s.logit_bias),
        "speculative": s.speculative is not None and s.speculative.asks,
    }
    for field_name, used in refused.items():
        if used:
            field = Field(field_name)
            raise InvalidRequest([field, " cannot be combined with ", beams, "."], param=field)


def apply_tools(request: GenerationRequest, chat_format: ChatFormat) -> GenerationRequest:
    """The request as the model gets it: tools dropped for ``none``, a forced-call grammar
    added for ``required`` or a name (:func:`backends.chat.tools.plan_tools`)."""
    chat = request.chat
    guided = request.sampling.guidance is not None
    plan = plan_tools(
        chat_format.tools,
        chat.tools if chat is not None else None,
        request.tool_choice,
        parallel=request.parallel_tool_calls,
        guided_by=Field(request.guidance_field) if guided else None,
        held=held_tool,
    )
    if chat is not None and chat.tools and not plan.offered:
        request = dataclasses.replace(request, prompt=dataclasses.replace(chat, tools=None))
    if plan.call_grammar is not None and usable_grammar(plan.call_grammar.grammar):
        sampling = dataclasses.replace(request.sampling, call_grammar=plan.call_grammar)
        return dataclasses.replace(request, sampling=sampling)
    if plan.grammar is None:
        return request
    sampling = dataclasses.replace(request.sampling, guidance=("lark_grammar", plan.grammar))
    # The grammar writes the call at once: no thinking to split out, even where the template's
    # generation prompt opened a think block (QwQ, DeepSeek-R1), which would swallow the call.
    return dataclasses.replace(
        request, sampling=sampling, guidance_field="tools", split_reasoning=False
    )


def output_format(request: GenerationRequest, chat_format: ChatFormat) -> ChatFormat | None:
    """How this request's output is split: calls when it offers tools, thinking when its
    door reports it apart."""
    chat = request.chat
    return chat_format.select(
        tools=chat is not None and bool(chat.tools),
        reasoning=chat is not None and request.split_reasoning,
    )


def beam_leads(jobs: list[Job], n: int) -> list[Job]:
    """Beam search: one search per prompt returns its ``n`` choices; the first choice's job
    runs it and carries the others as followers."""
    leads = jobs[::n]
    for i, lead in enumerate(leads):
        lead.followers = jobs[i * n + 1 : (i + 1) * n]
    return leads


def plan_jobs(
    request: GenerationRequest,
    handle: RequestHandle,
    prompts: list[PreparedPrompt],
    model: LoadedModel,
    strategy: Strategy,
    limits: Limits,
    adapter: str | None,
) -> list[Job]:
    """On the owner thread, once the prompts are tokenized: the checks that need the tokens
    or the strategy, then one job per choice (per beam search with beams).

    The prompts are set on the handle here, before any of its events can be delivered."""
    check_vocabulary(model, request)
    deadline = request.deadline
    if deadline is None and limits.request_timeout:
        deadline = request.accepted_at + limits.request_timeout
    jobs = []
    for choice in handle.choices:
        prompt = prompts[choice.prompt_index]
        max_new = plan_max_new_tokens(
            len(prompt),
            request.max_tokens,
            limits.default_max_tokens,
            strategy.max_length,
            fit=request.fit_max_tokens,
            model_length=model.max_length,
        )
        params = choice_params(request, choice.index % request.n, max_new, adapter)
        refuse_unsupported(strategy.name, strategy.unsupported(params, len(prompt)), request)
        if prompt.media is not None:
            refuse_images(strategy, params, request)
        jobs.append(
            Job(
                choice.id,
                prompt.token_ids,
                params,
                handle.sink(choice),
                deadline=deadline,
                stops=tuple(request.stop),
                cancelled=choice.cancelled,
                group=handle.id,
                media=prompt.media,
                image_tokens=prompt.image_tokens,
                image_digests=prompt.image_digests,
            )
        )
    handle.prompts = prompts
    handle.token_limits = [job.params.max_new_tokens for job in jobs]
    return beam_leads(jobs, request.n) if request.sampling.num_beams > 1 else jobs
