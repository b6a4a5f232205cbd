"""Uploaded audio, checked before any model sees it: what it is, how long it is, and the pieces
a 30-second model window takes.

onnxruntime-genai's audio processor decodes WAV, FLAC and MP3 itself; those bytes are handed to
it unchanged (its features are the ones the oracle checks). Anything else libsndfile reads
(Ogg Vorbis/Opus, AIFF, ...) and audio longer than one window are decoded here with soundfile
and handed over as 16-bit WAV, one window at a time. Called off the event loop.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import soundfile as sf

from backends.errors import InvalidRequest

WINDOW_SECONDS = 30.0  # what one Whisper encoder pass covers
MODEL_RATE = 16000  # Whisper's sample rate; the audio processor only resamples downwards
NATIVE_FORMATS = {"WAV", "FLAC", "MP3"}  # decoded by the audio processor itself


class InvalidAudio(InvalidRequest):
    """The upload is not audio this server can decode, or it is over a limit."""

    code = "invalid_audio"


@dataclass(frozen=True)
class AudioWindow:
    """One model window: the bytes for the audio processor, where it starts and how long."""

    data: bytes
    start: float
    duration: float


@dataclass(frozen=True)
class Audio:
    format: str  # libsndfile's name: WAV, FLAC, MP3, OGG, ...
    duration: float  # seconds
    windows: tuple[AudioWindow, ...]


def probe(data: bytes, *, max_seconds: float, param: str = "file") -> tuple[str, float, int]:
    """The format, duration and sample rate of ``data``; InvalidAudio if it is not audio or
    too long."""
    if not data:
        raise InvalidAudio("The audio file is empty.", param=param)
    try:
        info = sf.info(io.BytesIO(data))
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise InvalidAudio(
            f"The uploaded file is not audio this server can decode ({_reason(exc)}); "
            "send WAV, FLAC, MP3 or Ogg.",
            param=param,
        ) from None
    if info.samplerate <= 0 or info.frames <= 0:
        raise InvalidAudio("The audio file holds no samples.", param=param)
    duration = info.frames / info.samplerate
    if duration > max_seconds:
        raise InvalidAudio(
            f"The audio is {duration:.1f} s long; this server accepts at most {max_seconds:g} s "
            "(GENAI_MAX_AUDIO_SECONDS).",
            param=param,
        )
    return info.format, duration, info.samplerate


def prepare(data: bytes, *, max_seconds: float, param: str = "file") -> Audio:
    """Check ``data`` and cut it into model windows."""
    fmt, duration, rate = probe(data, max_seconds=max_seconds, param=param)
    if fmt in NATIVE_FORMATS and duration <= WINDOW_SECONDS and rate >= MODEL_RATE:
        return Audio(fmt, duration, (AudioWindow(data, 0.0, duration),))
    try:
        pcm, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError) as exc:
        raise InvalidAudio(
            f"The audio could not be decoded ({_reason(exc)}).", param=param
        ) from None
    mono = pcm.mean(axis=1)
    if rate < MODEL_RATE:  # up to 16 kHz here (linear: no new content is needed)
        mono = _upsample(mono, rate, MODEL_RATE)
        rate = MODEL_RATE
    step = int(WINDOW_SECONDS * rate)
    windows: list[AudioWindow] = []
    for begin in range(0, len(mono), step):
        piece = mono[begin : begin + step]
        if len(piece) < rate // 100 and windows:  # under 10 ms: nothing to hear
            break
        windows.append(AudioWindow(_wav(piece, rate), begin / rate, len(piece) / rate))
    return Audio(fmt, duration, tuple(windows))


def _upsample(pcm: np.ndarray, rate: int, to: int) -> np.ndarray:
    n = int(round(len(pcm) * to / rate))
    out: np.ndarray = np.interp(np.arange(n) * (rate / to), np.arange(len(pcm)), pcm)
    return out.astype(np.float32)


def _wav(pcm: np.ndarray, rate: int) -> bytes:
    out = io.BytesIO()
    sf.write(out, pcm, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]
