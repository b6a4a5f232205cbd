"""The bodies of /v1/audio/transcriptions, in OpenAI's shapes (openai-python's
``Transcription``, ``TranscriptionVerbose`` and the ``transcript.text.*`` stream events), plus
the server's timing metrics."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

ResponseFormat = Literal["json", "text", "srt", "verbose_json", "vtt"]
RESPONSE_FORMATS: tuple[str, ...] = get_args(ResponseFormat)


class UsageInputDetails(BaseModel):
    text_tokens: int = Field(description="Decoder prompt tokens (start of transcript, ...).")
    audio_tokens: int = Field(description="Encoder positions: 1,500 per 30-second window.")


class TranscriptionUsage(BaseModel):
    type: Literal["tokens"] = "tokens"
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_token_details: UsageInputDetails
    seconds: float = Field(description="The audio's duration (what `type: duration` bills).")


class TranscriptionMetrics(BaseModel):
    """The server's timing of one transcription (not in OpenAI's API)."""

    queue_time: float = Field(description="Seconds from accepted to the model starting it.")
    ttft: float = Field(description="Seconds from accepted to the first text (0 if none).")
    total_latency: float = Field(description="Seconds from accepted to done.")
    audio_seconds: float
    real_time_factor: float = Field(description="total_latency / audio_seconds.")
    output_tokens: int
    model: str


class TranscriptionJson(BaseModel):
    text: str
    usage: TranscriptionUsage
    metrics: TranscriptionMetrics


class TranscriptionSegment(BaseModel):
    id: int
    seek: int
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float = Field(
        description="P(<|nospeech|>) when the language was detected; 0 when it was given."
    )


class TranscriptionVerbose(BaseModel):
    task: Literal["transcribe"] = "transcribe"
    language: str
    duration: float
    text: str
    segments: list[TranscriptionSegment]
    usage: TranscriptionUsage
    metrics: TranscriptionMetrics


class TranscriptTextDelta(BaseModel):
    type: Literal["transcript.text.delta"] = "transcript.text.delta"
    delta: str


class TranscriptTextDone(BaseModel):
    type: Literal["transcript.text.done"] = "transcript.text.done"
    text: str
    usage: TranscriptionUsage
    metrics: TranscriptionMetrics
