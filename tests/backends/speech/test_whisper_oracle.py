"""The Whisper test model against its oracle (tests/hub_models/whisper-tiny/expected.json,
recorded by modelkit/whisper.py): onnxruntime-genai's audio features against
WhisperFeatureExtractor's, and the speech service's greedy tokens against Hugging Face
``WhisperForConditionalGeneration.generate()``, token for token."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backends.config import ModelConfig, ServiceConfig
from backends.core.speech_service import TranscriptionService
from backends.speech.request import TranscriptionRequest
from backends.speech.whisper import WhisperModel, is_speech_folder

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "tests" / "hub_models" / "whisper-tiny"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())
# Inside the clip the two feature extractors agree to float32 rounding (recorded at build time:
# max 1.4e-5 on these clips); 1e-4 leaves room for another CPU's arithmetic.
FEATURE_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def whisper() -> WhisperModel:
    return WhisperModel(FOLDER)


def test_the_folder_is_recognised_as_speech() -> None:
    assert is_speech_folder(FOLDER)
    assert not is_speech_folder(ROOT / "models" / "demo-llama")


@pytest.mark.parametrize("clip", sorted(EXPECTED["reference_features"]))
def test_audio_features_match_whisper_feature_extractor(whisper: WhisperModel, clip: str) -> None:
    import onnxruntime_genai as og

    data = (FOLDER / "samples" / f"{clip}.wav").read_bytes()
    inputs = whisper.processor("<|startoftranscript|>", audios=og.Audios.open_bytes(data))
    ours = np.asarray(inputs["audio_features"].as_numpy())[0][:, EXPECTED["reference_frames"]].T
    reference = np.asarray(EXPECTED["reference_features"][clip])
    assert ours.shape == reference.shape == (30, 80)
    assert np.abs(ours - reference).max() < FEATURE_TOLERANCE


def test_recorded_feature_error_is_the_stated_tolerance() -> None:
    """What the build measured over every frame of the lossless clips (MP3 decoders differ)."""
    for name, error in EXPECTED["feature_error"].items():
        if not name.endswith(".mp3"):
            assert error["max_abs"] < FEATURE_TOLERANCE, name


def _transcribe(requests: list[TranscriptionRequest]) -> list[Any]:
    async def run() -> list[Any]:
        service = TranscriptionService(ServiceConfig(ModelConfig(path=FOLDER, name="whisper")))
        await service.start()
        try:
            out = []
            for request in requests:
                handle = await service.transcribe(request)
                deltas = [d async for d in handle]
                out.append((deltas, await handle.result()))
            return out
        finally:
            await service.stop()

    return asyncio.run(run())


def test_greedy_tokens_match_hugging_face_generate() -> None:
    clips = EXPECTED["transcriptions"]
    requests = [
        TranscriptionRequest(audio=(FOLDER / c["file"]).read_bytes(), language="en") for c in clips
    ]
    for clip, (deltas, result) in zip(clips, _transcribe(requests), strict=True):
        (segment,) = result.segments
        assert list(segment.tokens) == clip["generated_ids"], clip["file"]
        assert len(segment.tokens) == EXPECTED["max_new_tokens"]
        assert result.text == clip["text"]  # Hugging Face's decode, timestamps dropped
        assert "".join(deltas) == result.text
        assert result.finish_reason == clip["finish_reason"]
        assert result.usage.text_tokens == len(clip["prompt_ids"])
        assert result.usage.output_tokens == len(clip["generated_ids"])


def test_different_audio_gives_different_tokens() -> None:
    by_clip = {c["file"]: c["generated_ids"] for c in EXPECTED["transcriptions"]}
    assert by_clip["samples/tone.wav"] != by_clip["samples/chirp.wav"]


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="re-deriving expected.json needs torch and transformers (requirements-build.txt)",
)
def test_expected_json_rederives_from_the_weights() -> None:
    cmd = [sys.executable, "-m", "modelkit.whisper", "--out", str(FOLDER), "--check"]
    assert subprocess.run(cmd, cwd=ROOT, check=False).returncode == 0


def test_detected_language_matches_hugging_face_detect_language(whisper: WhisperModel) -> None:
    for clip in EXPECTED["transcriptions"]:
        detected = whisper.detect((FOLDER / clip["file"]).read_bytes())
        assert detected.language == clip["detected_language"], clip["file"]
        assert 0.0 <= detected.no_speech_prob <= 1.0


def test_prompted_tokens_match_hugging_face_generate_with_prompt_ids() -> None:
    prompted = EXPECTED["prompted"]
    request = TranscriptionRequest(
        audio=(FOLDER / prompted["file"]).read_bytes(), language="en", prompt=prompted["prompt"]
    )
    [(_, result)] = _transcribe([request])
    assert list(result.segments[0].tokens) == prompted["generated_ids"]
    assert result.usage.text_tokens == len(prompted["prompt_ids"])
    assert result.text == prompted["text"]
