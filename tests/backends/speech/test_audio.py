"""Uploaded audio before any model sees it: a decode error names the part in libsndfile's
words (never a Python object's repr), and the samples one upload may decode to are bounded
whatever rate and channels a compressed file claims; channels are mixed a block at a time."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from backends.speech.audio import InvalidAudio, max_frames, prepare, probe

pytestmark = pytest.mark.unit


def encoded(
    seconds: float, rate: int, channels: int, fmt: str = "FLAC", silent: bool = False
) -> bytes:
    frames = int(seconds * rate)
    pcm = np.zeros((frames, channels), dtype=np.float32)
    if not silent:
        pcm[:, 0] = 0.1 * np.sin(np.arange(frames) * 0.05)
    out = io.BytesIO()
    sf.write(out, pcm, rate, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize("data", [b"not audio at all" * 8, b"RIFF\x00\x00\x00\x00WAVEfmt "])
def test_a_decode_error_names_the_part_in_libsndfiles_words(data: bytes) -> None:
    with pytest.raises(InvalidAudio) as caught:
        probe(data, max_seconds=60, param="file")
    message = caught.value.message
    assert caught.value.param == "file" and message.startswith("file: ")
    assert "<_io" not in message and "0x" not in message and "object at" not in message


def test_a_compressed_file_cannot_claim_more_samples_than_the_bound() -> None:
    """60 s of 96 kHz silence is a small FLAC but 5.8 M samples a channel: over 100 s at 48 kHz
    (4.8 M) it is refused before it is decoded."""
    data = encoded(60.0, 96_000, 1, silent=True)
    assert len(data) < 1024 * 1024
    with pytest.raises(InvalidAudio) as caught:
        probe(data, max_seconds=100, param="file")
    assert f"at most {max_frames(100)}" in caught.value.message
    assert max_frames(100) == 4_800_000


def test_many_channels_are_mixed_down_and_cut_into_windows() -> None:
    audio = prepare(encoded(40.0, 16_000, 6), max_seconds=100)
    assert [round(w.duration, 3) for w in audio.windows] == [30.0, 10.0]
    first = sf.read(io.BytesIO(audio.windows[0].data), dtype="float32")
    assert first[1] == 16_000 and first[0].ndim == 1  # one channel, the model's rate
    # Channel 0 carries the signal, five are silent: the mix is their mean.
    want = 0.1 * np.sin(np.arange(16_000) * 0.05) / 6
    assert np.abs(first[0][:16_000] - want).max() < 2e-4


def test_short_native_audio_goes_to_the_processor_unchanged() -> None:
    data = encoded(3.0, 16_000, 1, fmt="WAV")
    audio = prepare(data, max_seconds=100)
    assert [w.data for w in audio.windows] == [data]
    many = prepare(encoded(3.0, 16_000, 6, fmt="WAV"), max_seconds=100)
    assert many.windows[0].data != data  # six channels: mixed here first
