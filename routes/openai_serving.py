"""OpenAI serving logic, free of FastAPI: request → generation parameters, generations → responses.

``start_*`` does everything that can still fail with a status code (model name, prompt rendering,
context length, parameter checks) and submits the generations; only then does a route pick JSON
(``*_response``) or SSE (``*_chunks``). Stop strings are applied here, per choice, with
:class:`backends.stops.StopMatcher`, so a stop string never reaches a client, even in a stream.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.errors import GenerationFailed
from backends.service import Generation, InferenceService
from backends.stops import StopMatcher
from backends.types import FinishEvent, GuidanceKind, PreparedPrompt, TokenEvent
from metrics.timing import RequestTimer
from schemas.chat import ChatMetrics
from schemas.openai import (
    SEED_MAX,
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatDelta,
    ChatLogprobs,
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    FinishReason,
    ModelCard,
    ModelList,
    PromptTokensDetails,
    SamplingFields,
    TokenLogprob,
    TopLogprob,
    UsageInfo,
)

STARTED_AT = int(time.time())  # "created" of the served model


# ---- request → generation parameters ---------------------------------------------------------
def sampling_fields(
    body: SamplingFields,
    choice: int,
    *,
    logprobs: bool,
    top_logprobs: int,
    guidance: tuple[GuidanceKind, str] | None,
) -> dict[str, Any]:
    """GenerationParams fields (all but max_new_tokens) for choice ``choice`` of ``body``."""
    return {
        "temperature": body.temperature,
        "top_p": body.top_p,
        "top_k": body.top_k,
        # Choice i of a seeded request uses seed + i: reproducible, yet the choices differ.
        "seed": None if body.seed is None else (body.seed + choice) % (SEED_MAX + 1),
        "min_new_tokens": body.min_tokens,
        "repetition_penalty": body.repetition_penalty,
        "presence_penalty": body.presence_penalty,
        "frequency_penalty": body.frequency_penalty,
        "logit_bias": body.token_bias(),
        "logprobs": logprobs,
        "top_logprobs": top_logprobs,
        "guidance": guidance,
    }


_FINISH_REASONS: dict[str, FinishReason] = {"length": "length", "timeout": "timeout"}


def openai_finish_reason(reason: str) -> FinishReason:
    # "cancelled" only reaches a client that has already gone, or is a stop string matched
    # here; "error" is raised before this is asked.
    return _FINISH_REASONS.get(reason, "stop")


# ---- a running request -----------------------------------------------------------------------
@dataclass
class Choice:
    index: int  # prompt index × n + i
    prompt_index: int
    gen: Generation
    stops: Sequence[str]


@dataclass
class Run:
    id: str
    model: str
    prompts: list[PreparedPrompt]
    choices: list[Choice]
    timer: RequestTimer
    logprobs: bool
    top_logprobs: int
    include_usage: bool
    created: int = field(default_factory=lambda: int(time.time()))

    def cancel(self) -> None:
        for choice in self.choices:
            choice.gen.cancel()


async def start_chat(
    service: InferenceService, body: ChatCompletionRequest, request_id: str | None = None
) -> Run:
    timer = RequestTimer()  # "accepted": the body parsed and validated
    service.check_model_name(body.model)
    service.check_admission(body.n)  # refuse early, before tokenizing, when full or draining
    prompt = await service.prepare_chat([m.as_template_message() for m in body.messages])
    return _submit(
        service,
        body,
        [prompt],
        timer,
        request_id=request_id,
        prefix="chatcmpl",
        max_tokens=body.token_limit,
        logprobs=body.logprobs,
        top_logprobs=body.top_logprobs or 0,
        guidance=body.guidance(),
    )


async def start_completion(
    service: InferenceService, body: CompletionRequest, request_id: str | None = None
) -> Run:
    timer = RequestTimer()
    service.check_model_name(body.model)
    service.check_admission(body.n * len(body.prompts))
    prompts = [await service.prepare_text(text) for text in body.prompts]
    return _submit(
        service,
        body,
        prompts,
        timer,
        request_id=request_id,
        prefix="cmpl",
        max_tokens=body.max_tokens,
        logprobs=body.logprobs is not None,
        top_logprobs=body.logprobs or 0,
        guidance=None,
    )


def _submit(
    service: InferenceService,
    body: SamplingFields,
    prompts: list[PreparedPrompt],
    timer: RequestTimer,
    *,
    request_id: str | None,
    prefix: str,
    max_tokens: int | None,
    logprobs: bool,
    top_logprobs: int,
    guidance: tuple[GuidanceKind, str] | None,
) -> Run:
    # Plan every choice before submitting any, so a refusal leaves nothing running.
    planned = [
        (
            p_index,
            i,
            prompt,
            service.plan(
                prompt,
                max_tokens=max_tokens,
                **sampling_fields(
                    body, i, logprobs=logprobs, top_logprobs=top_logprobs, guidance=guidance
                ),
            ),
        )
        for p_index, prompt in enumerate(prompts)
        for i in range(body.n)
    ]
    service.check_admission(len(planned))
    choices: list[Choice] = []
    try:
        for p_index, i, prompt, params in planned:
            index = p_index * body.n + i
            job_id = (
                request_id if request_id is None or len(planned) == 1 else f"{request_id}.{index}"
            )
            # One timer for all choices: the metrics span the whole request.
            gen = service.generate(prompt, params, timer, request_id=job_id)
            choices.append(Choice(index, p_index, gen, body.stop_list))
    except BaseException:
        for choice in choices:
            choice.gen.cancel()
        raise
    return Run(
        id=f"{prefix}-{uuid.uuid4().hex}",
        model=service.config.model_name,
        prompts=prompts,
        choices=choices,
        timer=timer,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        include_usage=bool(body.stream_options and body.stream_options.include_usage),
    )


# ---- one choice: tokens → visible text -------------------------------------------------------
@dataclass(frozen=True)
class PlacedToken:
    event: TokenEvent
    offset: int  # where the token's text starts in the choice's output


@dataclass(frozen=True)
class Piece:
    """Text now safe to show, the tokens it completes, and the finish reason on the last."""

    text: str
    tokens: list[PlacedToken]
    finish_reason: FinishReason | None = None


async def choice_pieces(choice: Choice) -> AsyncIterator[Piece]:
    gen, matcher = choice.gen, StopMatcher(choice.stops)
    waiting: list[PlacedToken] = []  # tokens whose text is (partly) held back
    produced = 0
    try:
        async for event in gen:
            if matcher.matched is not None:
                continue  # cancelled; drain until the scheduler confirms
            waiting.append(PlacedToken(event, produced))
            produced += len(event.text)
            text = matcher.feed(event.text)
            if matcher.matched is not None:
                gen.cancel()
                # Tokens that show at least partly before the stop string are reported.
                ready = [t for t in waiting if t.offset < matcher.released]
                waiting = []
            else:
                ready = [t for t in waiting if t.offset + len(t.event.text) <= matcher.released]
                waiting = waiting[len(ready) :]
            if text or ready:
                yield Piece(text, ready)
    finally:
        gen.cancel()  # a consumer that went away stops its generation
    finish = _finished(gen)
    if matcher.matched is not None:
        yield Piece("", [], "stop")
    else:
        yield Piece(matcher.flush(), waiting, openai_finish_reason(finish.reason))


def _finished(gen: Generation) -> FinishEvent:
    assert gen.finish is not None
    if gen.finish.reason == "error":
        raise GenerationFailed(f"Generation failed: {gen.finish.error}")
    return gen.finish


async def run_pieces(run: Run) -> AsyncIterator[tuple[int, Piece]]:
    """Every choice's pieces as they come, as (choice index, piece); choices run concurrently."""
    if len(run.choices) == 1:
        only = run.choices[0]
        async for piece in choice_pieces(only):
            yield only.index, piece
        return
    queue: asyncio.Queue[tuple[int, Piece] | Exception | None] = asyncio.Queue()

    async def pump(choice: Choice) -> None:
        try:
            async for piece in choice_pieces(choice):
                queue.put_nowait((choice.index, piece))
        except Exception as exc:
            queue.put_nowait(exc)
        else:
            queue.put_nowait(None)

    tasks = [asyncio.create_task(pump(c)) for c in run.choices]
    try:
        running = len(tasks)
        while running:
            item = await queue.get()
            if item is None:
                running -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        run.cancel()


# ---- totals ------------------------------------------------------------------------------------
def usage_of(run: Run) -> UsageInfo:
    prompt_tokens = sum(len(p) for p in run.prompts)
    completion_tokens = sum(_finished(c.gen).usage.completion_tokens for c in run.choices)
    cached = 0
    for p_index in range(len(run.prompts)):
        cached += max(
            _finished(c.gen).usage.cached_tokens for c in run.choices if c.prompt_index == p_index
        )
    return UsageInfo(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=cached),
    )


def metrics_of(run: Run) -> ChatMetrics:
    prompt_tokens = sum(len(p) for p in run.prompts)
    return ChatMetrics(**run.timer.finish(prompt_tokens).as_dict(), model=run.model)


# ---- logprobs ----------------------------------------------------------------------------------
async def token_names(service: InferenceService, tokens: Iterable[PlacedToken]) -> dict[int, str]:
    ids: set[int] = set()
    for t in tokens:
        ids.add(t.event.token_id)
        ids.update(token_id for token_id, _ in t.event.top_logprobs)
    ordered = sorted(ids)
    return dict(zip(ordered, await service.decode_tokens(ordered), strict=True)) if ordered else {}


def _logprob(event: TokenEvent) -> float:
    if event.logprob is None:
        raise GenerationFailed("logprobs were requested but the backend did not report them")
    return event.logprob


def chat_logprobs(tokens: list[PlacedToken], names: dict[int, str], top: int) -> ChatLogprobs:
    def entry(token_id: int, logprob: float) -> TopLogprob:
        name = names[token_id]
        return TopLogprob(token=name, logprob=logprob, bytes=list(name.encode()))

    content = []
    for t in tokens:
        chosen = entry(t.event.token_id, _logprob(t.event))
        content.append(
            TokenLogprob(
                **chosen.model_dump(),
                top_logprobs=[entry(i, lp) for i, lp in t.event.top_logprobs[:top]],
            )
        )
    return ChatLogprobs(content=content)


def completion_logprobs(
    tokens: list[PlacedToken], names: dict[int, str], top: int
) -> CompletionLogprobs:
    return CompletionLogprobs(
        tokens=[names[t.event.token_id] for t in tokens],
        token_logprobs=[_logprob(t.event) for t in tokens],
        top_logprobs=(
            [{names[i]: lp for i, lp in t.event.top_logprobs[:top]} for t in tokens]
            if top
            else None
        ),
        text_offset=[t.offset for t in tokens],
    )


# ---- whole responses ---------------------------------------------------------------------------
@dataclass
class ChoiceResult:
    text: list[str] = field(default_factory=list)
    tokens: list[PlacedToken] = field(default_factory=list)
    finish_reason: FinishReason | None = None


async def collect(run: Run) -> dict[int, ChoiceResult]:
    results = {c.index: ChoiceResult() for c in run.choices}
    try:
        async for index, piece in run_pieces(run):
            result = results[index]
            result.text.append(piece.text)
            result.tokens.extend(piece.tokens)
            result.finish_reason = piece.finish_reason or result.finish_reason
    finally:
        run.cancel()
    return results


async def chat_response(service: InferenceService, run: Run) -> ChatCompletion:
    results = await collect(run)
    names = await _names_if(run, service, results.values())
    return ChatCompletion(
        id=run.id,
        created=run.created,
        model=run.model,
        choices=[
            ChatChoice(
                index=index,
                message=AssistantMessage(content="".join(r.text)),
                logprobs=chat_logprobs(r.tokens, names, run.top_logprobs) if run.logprobs else None,
                finish_reason=r.finish_reason,
            )
            for index, r in sorted(results.items())
        ],
        usage=usage_of(run),
        metrics=metrics_of(run),
    )


async def completion_response(service: InferenceService, run: Run) -> Completion:
    results = await collect(run)
    names = await _names_if(run, service, results.values())
    return Completion(
        id=run.id,
        created=run.created,
        model=run.model,
        choices=[
            CompletionChoice(
                index=index,
                text="".join(r.text),
                logprobs=(
                    completion_logprobs(r.tokens, names, run.top_logprobs) if run.logprobs else None
                ),
                finish_reason=r.finish_reason,
            )
            for index, r in sorted(results.items())
        ],
        usage=usage_of(run),
        metrics=metrics_of(run),
    )


async def _names_if(
    run: Run, service: InferenceService, results: Iterable[ChoiceResult]
) -> dict[int, str]:
    if not run.logprobs:
        return {}
    return await token_names(service, (t for r in results for t in r.tokens))


# ---- streams -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamPart:
    """One choice's piece, with its logprobs resolved; ``metrics`` once everything ended."""

    index: int
    piece: Piece
    names: dict[int, str]
    metrics: ChatMetrics | None


async def _stream_parts(service: InferenceService, run: Run) -> AsyncIterator[StreamPart]:
    left = len(run.choices)
    try:
        async for index, piece in run_pieces(run):
            names = await token_names(service, piece.tokens) if run.logprobs else {}
            if piece.finish_reason is not None:
                left -= 1
            yield StreamPart(index, piece, names, metrics_of(run) if left == 0 else None)
    finally:
        run.cancel()


async def chat_chunks(service: InferenceService, run: Run) -> AsyncIterator[ChatCompletionChunk]:
    """OpenAI chat chunks: a role chunk per choice, content deltas, a finish chunk per choice
    (the last one carries ``metrics``), then the ``include_usage`` chunk if asked."""

    def chunk(choices: list[ChatChunkChoice], **extra: Any) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=run.id, created=run.created, model=run.model, choices=choices, **extra
        )

    for c in run.choices:
        yield chunk([ChatChunkChoice(index=c.index, delta=ChatDelta(role="assistant", content=""))])
    metrics: ChatMetrics | None = None
    async for part in _stream_parts(service, run):
        piece = part.piece
        logprobs = (
            chat_logprobs(piece.tokens, part.names, run.top_logprobs)
            if run.logprobs and piece.tokens
            else None
        )
        if piece.text or logprobs is not None:
            delta = ChatDelta(content=piece.text)
            yield chunk([ChatChunkChoice(index=part.index, delta=delta, logprobs=logprobs)])
        if piece.finish_reason is not None:
            metrics = part.metrics
            done = ChatChunkChoice(
                index=part.index, delta=ChatDelta(), finish_reason=piece.finish_reason
            )
            yield chunk([done], metrics=None if run.include_usage else metrics)
    if run.include_usage:
        yield chunk([], usage=usage_of(run), metrics=metrics)


async def completion_chunks(service: InferenceService, run: Run) -> AsyncIterator[Completion]:
    """Text-completion chunks; the finish of the last choice carries ``metrics``, then the
    ``include_usage`` chunk if asked."""

    def chunk(choices: list[CompletionChoice], **extra: Any) -> Completion:
        return Completion(id=run.id, created=run.created, model=run.model, choices=choices, **extra)

    metrics: ChatMetrics | None = None
    async for part in _stream_parts(service, run):
        piece = part.piece
        logprobs = (
            completion_logprobs(piece.tokens, part.names, run.top_logprobs)
            if run.logprobs and piece.tokens
            else None
        )
        if piece.finish_reason is not None:
            metrics = part.metrics
        if piece.text or logprobs is not None or piece.finish_reason is not None:
            choice = CompletionChoice(
                index=part.index,
                text=piece.text,
                logprobs=logprobs,
                finish_reason=piece.finish_reason,
            )
            last = piece.finish_reason is not None and part.metrics is not None
            yield chunk([choice], metrics=part.metrics if last and not run.include_usage else None)
    if run.include_usage:
        yield chunk([], usage=usage_of(run), metrics=metrics)


# ---- models ------------------------------------------------------------------------------------
def model_list(service: InferenceService) -> ModelList:
    return ModelList(data=[model_card(service)])


def model_card(service: InferenceService) -> ModelCard:
    length = service.max_length
    return ModelCard(
        id=service.config.model_name,
        created=STARTED_AT,
        max_model_len=length,
        context_length=length,
    )
