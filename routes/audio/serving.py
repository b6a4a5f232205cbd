"""Transcriptions in OpenAI's shapes: the form to a :class:`TranscriptionRequest`, and the
result to json, text, srt, vtt or verbose_json, or to ``transcript.text.*`` events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from backends.core.speech_service import TranscriptionHandle
from backends.errors import InvalidRequest
from backends.speech.request import Segment, TranscriptionResult
from schemas.audio import (
    TranscriptionJson,
    TranscriptionMetrics,
    TranscriptionSegment,
    TranscriptionUsage,
    TranscriptionVerbose,
    TranscriptTextDelta,
    TranscriptTextDone,
    UsageInputDetails,
)

GRANULARITIES = ("segment",)
LIST_FIELDS = ("timestamp_granularities[]", "include[]")


def check_fields(names: list[str]) -> None:
    """A form field given twice (two files, two models) is refused, not decided by order."""
    for name in dict.fromkeys(names):
        count = names.count(name)
        if count > 1 and name not in LIST_FIELDS:
            raise InvalidRequest(f"{name}: the form holds {count} of them; send one.", param=name)


def check_options(
    granularities: list[str] | None, include: list[str] | None, response_format: str
) -> None:
    """What OpenAI's API takes that this server cannot honour is refused, not ignored."""
    for value in granularities or []:
        if value not in GRANULARITIES:
            raise InvalidRequest(
                f"timestamp_granularities {value!r} is not supported; only 'segment' "
                "(segments are the model's 30-second windows).",
                param="timestamp_granularities",
            )
    if granularities and response_format != "verbose_json":
        raise InvalidRequest(
            "timestamp_granularities needs response_format verbose_json.",
            param="timestamp_granularities",
        )
    for value in include or []:
        raise InvalidRequest(f"include {value!r} is not supported.", param="include")


def usage(result: TranscriptionResult) -> TranscriptionUsage:
    u = result.usage
    inputs = u.text_tokens + u.audio_tokens
    return TranscriptionUsage(
        input_tokens=inputs,
        output_tokens=u.output_tokens,
        total_tokens=inputs + u.output_tokens,
        input_token_details=UsageInputDetails(
            text_tokens=u.text_tokens, audio_tokens=u.audio_tokens
        ),
        seconds=round(result.duration, 3),
    )


def metrics(result: TranscriptionResult, model: str) -> TranscriptionMetrics:
    t = result.timing
    return TranscriptionMetrics(
        queue_time=round(t.queue_time, 6),
        ttft=round(t.first_text, 6),
        total_latency=round(t.total, 6),
        audio_seconds=round(t.audio_seconds, 3),
        real_time_factor=round(t.real_time_factor, 6),
        output_tokens=result.usage.output_tokens,
        model=model,
    )


def _segment(s: Segment) -> TranscriptionSegment:
    return TranscriptionSegment(
        id=s.id,
        seek=s.seek,
        start=s.start,
        end=s.end,
        text=s.text,
        tokens=list(s.tokens),
        temperature=s.temperature,
        avg_logprob=s.avg_logprob,
        compression_ratio=s.compression_ratio,
        no_speech_prob=s.no_speech_prob,
    )


def as_json(result: TranscriptionResult, model: str) -> TranscriptionJson:
    return TranscriptionJson(text=result.text, usage=usage(result), metrics=metrics(result, model))


def as_verbose(result: TranscriptionResult, model: str) -> TranscriptionVerbose:
    return TranscriptionVerbose(
        language=result.language,
        duration=round(result.duration, 3),
        text=result.text,
        segments=[_segment(s) for s in result.segments],
        usage=usage(result),
        metrics=metrics(result, model),
    )


def _clock(seconds: float, decimal: str) -> str:
    ms = int(round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{decimal}{ms:03d}"


def as_srt(result: TranscriptionResult) -> str:
    blocks = [
        f"{i}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text.strip()}\n"
        for i, s in enumerate(result.segments, start=1)
    ]
    return "\n".join(blocks)


def as_vtt(result: TranscriptionResult) -> str:
    blocks = [
        f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text.strip()}\n"
        for s in result.segments
    ]
    return "WEBVTT\n\n" + "\n".join(blocks)


async def events(handle: TranscriptionHandle, model: str) -> AsyncIterator[str]:
    """``transcript.text.delta`` per piece of text, then one ``transcript.text.done``."""
    async for piece in handle:
        yield TranscriptTextDelta(delta=piece).model_dump_json()
    result = await handle.result()
    done = TranscriptTextDone(text=result.text, usage=usage(result), metrics=metrics(result, model))
    yield json.dumps(done.model_dump())
