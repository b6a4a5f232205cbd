"""What a transcription asks for and what it gives back: plain data shared by the speech
service, the route and the metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TranscriptionRequest:
    audio: bytes
    model: str | None = None
    language: str | None = None  # None: detected
    prompt: str | None = None
    temperature: float = 0.0
    request_id: str = ""
    max_seconds: float = 1800.0


@dataclass(frozen=True)
class Segment:
    id: int
    start: float
    end: float
    text: str
    tokens: tuple[int, ...]
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    temperature: float
    seek: int  # the window's start, in mel frames (100 per second)


@dataclass(frozen=True)
class SpeechUsage:
    text_tokens: int  # the decoder prompts' tokens
    audio_tokens: int  # encoder positions, AUDIO_TOKENS_PER_WINDOW per window
    output_tokens: int


@dataclass(frozen=True)
class SpeechTiming:
    queue_time: float  # accepted (audio checked) to the owner thread starting it
    first_text: float  # accepted to the first text delta (0.0 if none)
    total: float  # accepted to done
    audio_seconds: float

    @property
    def real_time_factor(self) -> float:
        """Processing time over audio time: under 1 is faster than real time."""
        return self.total / self.audio_seconds if self.audio_seconds else 0.0


@dataclass(frozen=True)
class TranscriptionResult:
    id: str
    text: str
    language: str
    duration: float
    format: str
    bytes: int
    segments: tuple[Segment, ...]
    usage: SpeechUsage
    timing: SpeechTiming
    finish_reason: str
