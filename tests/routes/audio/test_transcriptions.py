"""/v1/audio/transcriptions through the real app, a chat model and the Whisper test model side
by side: the oracle's tokens, every response format, streaming, and every refusal (status,
the one error shape, and the next request served)."""

from __future__ import annotations

import io
import json
import math
import wave
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from config.settings import DEMO_MODEL_DIR, REPO_ROOT
from tests.conftest import assert_error, make_client, metric, parse_sse, wait_ready
from tests.routes.http.test_sse_framing import assert_lf_framing

pytestmark = pytest.mark.model

WHISPER = REPO_ROOT / "tests" / "hub_models" / "whisper-tiny"
EXPECTED = json.loads((WHISPER / "expected.json").read_text())
TONE = next(c for c in EXPECTED["transcriptions"] if c["file"] == "samples/tone.wav")


def wav_bytes(seconds: float, rate: int = 16000, channels: int = 1) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    x = (0.3 * np.sin(2 * math.pi * 220 * t) * 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(x, channels).tobytes())
    return out.getvalue()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path = tmp_path_factory.mktemp("models") / "models.toml"
    path.write_text(
        f'[[models]]\nname = "demo"\npath = "{DEMO_MODEL_DIR}"\n\n'
        f'[[models]]\nname = "whisper"\npath = "{WHISPER}"\n'
    )
    with make_client(models_file=path, max_audio_seconds=100, max_audio_mib=1) as c:
        wait_ready(c)
        yield c


def transcribe(client: TestClient, data: bytes, name: str = "a.wav", **form: Any) -> Any:
    fields = {"model": "whisper", "language": "en", **form}
    return client.post(
        "/v1/audio/transcriptions",
        files={"file": (name, data, "application/octet-stream")},
        data={k: str(v) for k, v in fields.items() if v is not None},
    )


def sample(name: str) -> bytes:
    return (WHISPER / "samples" / name).read_bytes()


def served_next(client: TestClient) -> None:
    resp = transcribe(client, sample("tone.wav"))
    assert resp.status_code == 200, resp.text
    assert resp.json()["text"] == TONE["text"]


# ---- the oracle, every format -------------------------------------------------------------
@pytest.mark.parametrize("clip", EXPECTED["transcriptions"], ids=lambda c: c["file"])
def test_verbose_json_carries_the_oracles_tokens(client: TestClient, clip: dict[str, Any]) -> None:
    resp = transcribe(client, (WHISPER / clip["file"]).read_bytes(), response_format="verbose_json")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    (segment,) = body["segments"]
    assert segment["tokens"] == clip["generated_ids"]
    assert body["text"] == clip["text"] == segment["text"]
    assert body["language"] == "en"
    assert body["task"] == "transcribe"
    assert segment["start"] == 0.0
    assert segment["end"] == pytest.approx(body["duration"])
    usage = body["usage"]
    assert usage["output_tokens"] == len(clip["generated_ids"])
    assert usage["input_token_details"] == {"text_tokens": 4, "audio_tokens": 1500}
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    m = body["metrics"]
    assert 0 < m["ttft"] <= m["total_latency"]
    assert m["real_time_factor"] == pytest.approx(m["total_latency"] / m["audio_seconds"], 1e-3)


def test_json_and_text(client: TestClient) -> None:
    body = transcribe(client, sample("tone.flac")).json()
    assert body["text"] == TONE["text"]
    assert body["usage"]["type"] == "tokens"
    assert body["usage"]["seconds"] == pytest.approx(3.0)
    resp = transcribe(client, sample("tone.wav"), response_format="text")
    assert resp.headers["content-type"].startswith("text/plain")
    assert resp.text == TONE["text"]


def test_srt_and_vtt(client: TestClient) -> None:
    srt = transcribe(client, sample("tone.wav"), response_format="srt").text
    assert srt.splitlines()[:2] == ["1", "00:00:00,000 --> 00:00:03,000"]
    assert srt.splitlines()[2] == TONE["text"].strip()
    resp = transcribe(client, sample("tone.wav"), response_format="vtt")
    assert resp.headers["content-type"].startswith("text/vtt")
    lines = resp.text.splitlines()
    assert lines[0] == "WEBVTT"
    assert lines[2] == "00:00:00.000 --> 00:00:03.000"


def test_stream_deltas_add_up_to_the_oracles_text(client: TestClient) -> None:
    with client.stream(
        "POST",
        "/v1/audio/transcriptions",
        files={"file": ("a.wav", sample("tone.wav"), "audio/wav")},
        data={"model": "whisper", "language": "en", "stream": "true"},
    ) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        raw = resp.read()
    assert_lf_framing(raw)  # the framing every streaming route keeps
    events = [json.loads(p) for p in parse_sse(iter(raw.decode().split("\n")))]
    deltas = [e for e in events if e["type"] == "transcript.text.delta"]
    assert len(deltas) > 1
    done = events[-1]
    assert done["type"] == "transcript.text.done"
    assert "".join(e["delta"] for e in deltas) == done["text"] == TONE["text"]
    assert done["usage"]["output_tokens"] == len(TONE["generated_ids"])


def test_mp3_and_ogg_decode(client: TestClient) -> None:
    import soundfile as sf

    body = transcribe(client, sample("tone.mp3"), response_format="verbose_json").json()
    assert body["duration"] == pytest.approx(3.0, abs=0.1)
    assert body["usage"]["output_tokens"] > 0
    pcm, rate = sf.read(io.BytesIO(sample("tone.wav")), dtype="float32")
    ogg = io.BytesIO()
    sf.write(ogg, pcm, rate, format="OGG", subtype="VORBIS")
    body = transcribe(client, ogg.getvalue(), "a.ogg", response_format="verbose_json").json()
    assert body["duration"] == pytest.approx(3.0, abs=0.05)
    assert len(body["segments"]) == 1


def test_long_audio_is_cut_into_30_second_windows(client: TestClient) -> None:
    body = transcribe(client, wav_bytes(40.0, rate=8000), response_format="verbose_json").json()
    starts = [(s["start"], s["end"]) for s in body["segments"]]
    assert starts == [(0.0, 30.0), (30.0, 40.0)]
    assert body["usage"]["input_token_details"]["audio_tokens"] == 3000


def test_language_detected_when_not_given(client: TestClient) -> None:
    resp = transcribe(client, sample("tone.wav"), response_format="verbose_json", language="")
    body = resp.json()
    assert body["language"] in {"en", "zh", "de", "es", "ru", "ko", "fr", "ja"}
    assert 0.0 <= body["segments"][0]["no_speech_prob"] <= 1.0


def test_prompt_conditions_the_decoder(client: TestClient) -> None:
    resp = transcribe(client, sample("tone.wav"), response_format="verbose_json", prompt="river")
    body = resp.json()
    # <|startofprev|>, the prompt's tokens, then the four of the transcript's start
    assert body["usage"]["input_token_details"]["text_tokens"] > 5
    assert body["segments"][0]["tokens"] != TONE["generated_ids"]


# ---- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "form", "status", "param"),
    [
        (b"", {}, 400, "file"),
        (b"not audio at all, just some bytes" * 10, {}, 400, "file"),
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", {}, 400, "file"),
        (None, {"response_format": "docx"}, 400, "response_format"),
        (None, {"temperature": "2"}, 400, "temperature"),
        (None, {"language": "xx"}, 400, "language"),
        (None, {"prompt": "word " * 400}, 400, "prompt"),
        (None, {"model": "demo"}, 400, "model"),
        (None, {"model": "nope"}, 404, "model"),
        (None, {"timestamp_granularities[]": "word"}, 400, "timestamp_granularities"),
    ],
)
def test_bad_requests(
    client: TestClient, data: bytes | None, form: dict[str, str], status: int, param: str
) -> None:
    resp = transcribe(client, sample("tone.wav") if data is None else data, **form)
    err = assert_error(resp, status, param)
    if param == "model" and status == 400:
        assert "a generator model" in err["message"] and "demo" in err["message"]
    served_next(client)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_temperature_that_is_not_a_number_says_so(client: TestClient, value: str) -> None:
    err = assert_error(transcribe(client, sample("tone.wav"), temperature=value), 400)
    assert err["param"] == "temperature" and "finite number" in err["message"]


def test_undecodable_bytes_name_the_file_never_an_object(client: TestClient) -> None:
    err = assert_error(transcribe(client, b"\x00garbage" * 64), 400, "file")
    assert err["message"].startswith("file: ") and "Format not recognised" in err["message"]
    assert "<_io" not in err["message"] and "0x" not in err["message"]


@pytest.mark.parametrize("field", ["file", "model", "language"])
def test_a_form_field_sent_twice_is_refused(client: TestClient, field: str) -> None:
    tone = ("a.wav", sample("tone.wav"), "audio/wav")
    files = [("file", tone)] + ([("file", tone)] if field == "file" else [])
    data: dict[str, Any] = {"model": "whisper", "language": "en"}
    if field != "file":
        data[field] = [data[field], data[field]]
    resp = client.post("/v1/audio/transcriptions", files=files, data=data)
    err = assert_error(resp, 400, field)
    assert "holds 2 of them" in err["message"]
    served_next(client)


def test_a_finished_transcription_frees_its_audio_at_once(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No reference cycle holds a finished job's audio (the upload and its decoded windows):
    it used to wait for the cyclic garbage collector, tens of MB a request (issue 37)."""
    import gc
    import time
    import weakref

    from backends.core import speech_service as service

    kept: list[weakref.ref[Any]] = []

    def prepare(data: bytes, **kwargs: Any) -> Any:
        audio = real(data, **kwargs)
        kept.append(weakref.ref(audio))
        return audio

    real = service.prepare  # type: ignore[attr-defined]
    monkeypatch.setattr(service, "prepare", prepare)
    gc.disable()
    try:
        served_next(client)
        deadline = time.monotonic() + 2  # the owner thread lets go just after answering
        while kept and kept[0]() is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert kept and kept[0]() is None
    finally:
        gc.enable()


def test_over_length_audio_is_refused(client: TestClient) -> None:
    err = assert_error(transcribe(client, wav_bytes(110.0, rate=2000)), 400, "file")
    assert "100" in err["message"]
    served_next(client)


def test_over_size_upload_is_413(client: TestClient) -> None:
    err = assert_error(transcribe(client, wav_bytes(40.0)), 413, "file")  # 1.2 MiB > 1
    assert "MiB" in err["message"]
    served_next(client)


def test_missing_file_is_400(client: TestClient) -> None:
    resp = client.post("/v1/audio/transcriptions", data={"model": "whisper"})
    assert_error(resp, 400, "file")


def test_chat_request_to_whisper_names_its_kind(client: TestClient) -> None:
    resp = client.post(
        "/v1/chat/completions",
        json={"model": "whisper", "messages": [{"role": "user", "content": "hi"}]},
    )
    err = assert_error(resp, 400, "model")
    assert "a transcription model" in err["message"]
    resp = client.post(
        "/v1/chat/completions",
        json={"model": "demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
    )
    assert resp.status_code == 200


def test_models_health_and_metrics_list_whisper(client: TestClient) -> None:
    ids = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert ids == ["demo", "whisper"]
    assert client.get("/healthz").json()["models"] == {"demo": "ok", "whisper": "ok"}
    before = client.get("/metrics").text
    transcribe(client, sample("tone.wav"))
    after = client.get("/metrics").text

    def grew(name: str) -> float:
        return metric(after, name) - metric(before, name)

    assert grew("genai_media_requests_total") == 1
    assert grew("genai_media_bytes_total") == len(sample("tone.wav"))
    assert grew("genai_audio_seconds_total") == pytest.approx(3.0)


def test_unload_whisper_then_transcriptions_name_it_missing(tmp_path: Any) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        f'[[models]]\nname = "demo"\npath = "{DEMO_MODEL_DIR}"\n\n'
        f'[[models]]\nname = "whisper"\npath = "{WHISPER}"\n'
    )
    with make_client(models_file=path, admin=True, model_root=REPO_ROOT) as c:
        wait_ready(c)
        assert transcribe(c, sample("tone.wav")).status_code == 200
        resp = c.delete("/admin/models/whisper")
        assert resp.status_code == 200, resp.text
        assert_error(transcribe(c, sample("tone.wav")), 404, "model")
        resp = c.post("/admin/models", json={"name": "whisper", "path": str(WHISPER)})
        assert_error(resp, 400, "path")


def test_chat_is_served_while_audio_is_transcribed(client: TestClient) -> None:
    """Audio decoding and the Whisper model run off the event loop and off the chat model's
    thread: a chat request sent meanwhile completes before the long transcription does."""
    import threading
    import time

    finished: dict[str, float] = {}

    def long_transcription() -> None:
        resp = transcribe(client, wav_bytes(90.0, rate=4000))  # upsampled, three windows
        assert resp.status_code == 200, resp.text
        finished["audio"] = time.monotonic()

    worker = threading.Thread(target=long_transcription)
    worker.start()
    time.sleep(0.2)
    resp = client.post(
        "/v1/chat/completions",
        json={"model": "demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    finished["chat"] = time.monotonic()
    worker.join(120)
    assert resp.status_code == 200
    assert finished["chat"] < finished["audio"]


def test_request_timeout_is_a_504(tmp_path: Any) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        f'[[models]]\nname = "demo"\npath = "{DEMO_MODEL_DIR}"\n\n'
        f'[[models]]\nname = "whisper"\npath = "{WHISPER}"\n'
    )
    with make_client(models_file=path, request_timeout=0.05) as c:
        wait_ready(c)
        err = assert_error(transcribe(c, sample("chirp.wav")), 504)
        assert "GENAI_REQUEST_TIMEOUT" in err["message"]


def test_a_whisper_folder_alone_is_served() -> None:
    """GENAI_MODEL_DIR may name a Whisper folder: it transcribes, and chat routes answer
    with a 400 that names its kind."""
    with make_client(model_dir=WHISPER) as c:
        wait_ready(c)
        health = c.get("/healthz").json()
        assert health["status"] == "ok" and list(health["models"].values()) == ["ok"]
        assert c.get("/readyz").status_code == 200
        assert transcribe(c, sample("tone.wav"), model=None).json()["text"] == TONE["text"]
        resp = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
        assert "a transcription model" in assert_error(resp, 400, "model")["message"]
