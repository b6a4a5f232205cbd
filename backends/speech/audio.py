"""Uploaded audio, checked before any model sees it: what it is, how long it is, and the pieces
a 30-second model window takes.

onnxruntime-genai's audio processor decodes WAV, FLAC and MP3 itself; those bytes are handed to
it unchanged (its features are the ones the oracle checks) when they are at most one window,
two channels and 48 kHz. Anything else libsndfile reads (Ogg Vorbis/Opus, AIFF, ...) and longer
audio are decoded here with soundfile, a block at a time to one channel, and handed over as
16-bit WAV, one window at a time. Memory is bounded by samples, not by the upload's size (a
compressed file can claim any rate and channels): at most GENAI_MAX_AUDIO_SECONDS at 48 kHz per
channel are decoded, 6 bytes each (mono float32, then WAV). Called off the event loop.
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
BOUND_RATE = 48_000  # samples per second of GENAI_MAX_AUDIO_SECONDS one upload may decode to


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


def probe(data: bytes, *, max_seconds: float, param: str = "file") -> tuple[str, int, int, int]:
    """What ``data`` holds: its format, sample rate, channels and frames; InvalidAudio if it
    is not audio, too long, or more samples than the memory bound allows."""
    if not data:
        raise InvalidAudio(f"{param}: the audio file is empty.", param=param)
    try:
        info = sf.info(io.BytesIO(data))
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise InvalidAudio(
            f"{param}: the upload is not audio this server can decode ({_reason(exc)}); "
            "send WAV, FLAC, MP3 or Ogg.",
            param=param,
        ) from None
    if info.samplerate <= 0 or info.frames <= 0 or info.channels <= 0:
        raise InvalidAudio(f"{param}: the audio file holds no samples.", param=param)
    duration = info.frames / info.samplerate
    if duration > max_seconds:
        raise InvalidAudio(
            f"{param}: the audio is {duration:.1f} s long; this server accepts at most "
            f"{max_seconds:g} s (GENAI_MAX_AUDIO_SECONDS).",
            param=param,
        )
    most = max_frames(max_seconds)
    if info.frames > most:
        raise InvalidAudio(
            f"{param}: the audio holds {info.frames} samples per channel ({info.samplerate} Hz "
            f"for {duration:.1f} s); at most {most} are decoded (GENAI_MAX_AUDIO_SECONDS at "
            f"{BOUND_RATE // 1000} kHz).",
            param=param,
        )
    return info.format, info.samplerate, info.channels, info.frames


def max_frames(max_seconds: float) -> int:
    """Samples per channel one upload may decode to: what bounds its memory (as mono float32,
    4 bytes each, plus the windows' 16-bit WAV, 2 bytes each), whatever its rate claims."""
    return int(max_seconds * BOUND_RATE)


def prepare(data: bytes, *, max_seconds: float, param: str = "file") -> Audio:
    """Check ``data`` and cut it into model windows."""
    fmt, rate, channels, frames = probe(data, max_seconds=max_seconds, param=param)
    duration = frames / rate
    native = fmt in NATIVE_FORMATS and MODEL_RATE <= rate <= BOUND_RATE and channels <= 2
    if native and duration <= WINDOW_SECONDS:
        return Audio(fmt, duration, (AudioWindow(data, 0.0, duration),))
    mono = _mono(data, channels, param)
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


def _mono(data: bytes, channels: int, param: str) -> np.ndarray:
    """The audio mixed down to one channel, decoded a block at a time (a block holds about
    a million samples, whatever the channel count)."""
    pieces: list[np.ndarray] = []
    try:
        blocks = sf.blocks(
            io.BytesIO(data), blocksize=max(1, 2**20 // channels), dtype="float32", always_2d=True
        )
        for block in blocks:
            pieces.append(block.mean(axis=1, dtype=np.float32))
    except (sf.LibsndfileError, RuntimeError, ValueError) as exc:
        raise InvalidAudio(
            f"{param}: the audio could not be decoded ({_reason(exc)}).", param=param
        ) from None
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)


def _upsample(pcm: np.ndarray, rate: int, to: int) -> np.ndarray:
    n = int(round(len(pcm) * to / rate))
    out: np.ndarray = np.interp(np.arange(n) * (rate / to), np.arange(len(pcm)), pcm)
    return out.astype(np.float32)


def _wav(pcm: np.ndarray, rate: int) -> bytes:
    out = io.BytesIO()
    sf.write(out, pcm, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def _reason(exc: Exception) -> str:
    """libsndfile's own words (not the exception's text, which names the Python object the
    bytes were read from, with its address)."""
    if isinstance(exc, sf.LibsndfileError):
        return exc.error_string.strip().rstrip(".")[:160] or "libsndfile could not read it"
    return "its header cannot be read"
