"""Contract: the official ``openai`` client's ``audio.transcriptions.create`` against a live
server process serving a chat model and the Whisper test model: a file upload in every
response format and streamed, each carrying the oracle's transcript."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai import OpenAI

from bench.harness.server import live_server
from config.settings import DEMO_MODEL_DIR, REPO_ROOT

pytestmark = pytest.mark.live

KEY = "audio-contract-key"
WHISPER = REPO_ROOT / "tests" / "hub_models" / "whisper-tiny"
EXPECTED = json.loads((WHISPER / "expected.json").read_text())
CLIP = next(c for c in EXPECTED["transcriptions"] if c["file"] == "samples/chirp.flac")
AUDIO = WHISPER / CLIP["file"]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAI]:
    models = tmp_path_factory.mktemp("audio") / "models.toml"
    models.write_text(
        f'[[models]]\nname = "demo"\npath = "{DEMO_MODEL_DIR}"\n\n'
        f'[[models]]\nname = "whisper"\npath = "{WHISPER}"\n'
    )
    with live_server(GENAI_API_KEY=KEY, GENAI_MODELS_FILE=str(models)) as server:
        yield OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=60)


def test_json(api: OpenAI) -> None:
    with AUDIO.open("rb") as f:
        out = api.audio.transcriptions.create(model="whisper", file=f, language="en")
    assert out.text == CLIP["text"]
    assert out.usage is not None and out.usage.type == "tokens"
    assert out.usage.output_tokens == len(CLIP["generated_ids"])
    assert out.model_extra is not None and out.model_extra["metrics"]["real_time_factor"] > 0


def test_verbose_json_has_the_oracles_tokens(api: OpenAI) -> None:
    out = api.audio.transcriptions.create(
        model="whisper",
        file=("chirp.flac", AUDIO.read_bytes()),
        language="en",
        response_format="verbose_json",
        timestamp_granularities=["segment"],
    )
    assert out.text == CLIP["text"]
    assert out.language == "en"
    assert out.duration == pytest.approx(7.5)
    assert out.segments is not None
    [segment] = out.segments
    assert segment.tokens == CLIP["generated_ids"]
    assert (segment.start, segment.end) == (0.0, 7.5)


@pytest.mark.parametrize("fmt", ["text", "srt", "vtt"])
def test_text_formats(api: OpenAI, fmt: str) -> None:
    out = api.audio.transcriptions.create(
        model="whisper",
        file=Path(AUDIO),
        language="en",
        response_format=fmt,  # type: ignore[call-overload]
    )
    assert isinstance(out, str)
    assert CLIP["text"].strip() in out
    if fmt == "srt":
        assert "00:00:00,000 --> 00:00:07,500" in out
    if fmt == "vtt":
        assert out.startswith("WEBVTT") and "00:00:00.000 --> 00:00:07.500" in out


def test_stream(api: OpenAI) -> None:
    events = list(
        api.audio.transcriptions.create(
            model="whisper", file=Path(AUDIO), language="en", stream=True
        )
    )
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    done = events[-1]
    assert done.type == "transcript.text.done"
    assert "".join(deltas) == done.text == CLIP["text"]
    assert done.usage is not None and done.usage.output_tokens == len(CLIP["generated_ids"])


def test_refusals_are_openai_errors(api: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="a generator model"):
        api.audio.transcriptions.create(model="demo", file=Path(AUDIO))
    with pytest.raises(openai.BadRequestError, match="a transcription model"):
        api.chat.completions.create(model="whisper", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as bad:
        api.audio.transcriptions.create(model="whisper", file=("x.wav", b"not audio"))
    assert bad.value.param == "file"
    assert api.audio.transcriptions.create(model="whisper", file=Path(AUDIO), language="en").text
