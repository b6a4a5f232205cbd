"""Issue 37's hostile requests on the media doors: images over the pixel cap on the doors
that take images, and audio past its limits on the transcription doors (the probes and their
helpers are tests/hostile_probes.py's)."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

import httpx

from tests.hostile_probes import CAP, Probe, chat, made, post_json


# ---- 3. images over the pixel cap, on the five doors that take images ----------------------
def png_header(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` and holds no pixels: a bomb's header."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def tiff_header(width: int, height: int) -> bytes:
    """A little-endian TIFF whose one directory claims ``width`` x ``height`` (8-bit RGB)."""
    tags = [(256, 4, width), (257, 4, height), (258, 3, 8), (259, 3, 1), (262, 3, 2)]
    tags += [(273, 4, 8), (277, 3, 3), (278, 4, height), (279, 4, 3 * width * height)]
    ifd = struct.pack("<H", len(tags))
    ifd += b"".join(struct.pack("<HHII", tag, kind, 1, value) for tag, kind, value in tags)
    return b"II*\x00" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0)


@cache
def stripes(side: int) -> bytes:
    """A real ``side`` x ``side`` PNG that compresses (a 25 Mpx image must, to be sent)."""
    import numpy as np
    from PIL import Image

    row = (np.arange(side) * 7 % 256).astype("uint8")
    pixels = np.ascontiguousarray(np.broadcast_to(row[None, :, None], (side, side, 3)))
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="PNG")
    return out.getvalue()


def image_doors(data: bytes) -> list[tuple[str, str, dict[str, Any], str | None]]:
    b64 = base64.b64encode(data).decode()
    url = f"data:image/png;base64,{b64}"
    part = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]
    source = {"type": "base64", "media_type": "image/png", "data": b64}
    anthropic = [{"role": "user", "content": [{"type": "image", "source": source}]}]
    responses = [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]
    ollama = [{"role": "user", "content": "look", "images": [b64]}]
    return [
        ("chat.completions", "/v1/chat/completions", chat(part, "vision"), "messages.0.content.1"),
        ("native chat", "/v1/chat", chat(part, "vision"), "messages.0.content.1"),
        ("responses", "/v1/responses", {"model": "vision", "input": responses}, None),
        (
            "messages",
            "/v1/messages",
            {"model": "vision", "max_tokens": 2, "messages": anthropic},
            None,
        ),
        (
            "ollama chat",
            "/api/chat",
            {"model": "vision", "messages": ollama, "stream": False},
            None,
        ),
    ]


def image_probes() -> list[Probe]:
    probes = []
    bombs = [("PNG", 5_100, png_header), ("PNG", 9_500, png_header), ("PNG", 40_000, png_header)]
    bombs += [("TIFF", 12_000, tiff_header)]
    for fmt, side, make in bombs:
        for name, path, body, param in image_doors(make(side, side)):
            words = (f"at most {CAP} pixels",)
            probe = Probe(f"{fmt} {side}x{side}/{name}", post_json(path, body), 413, words, param)
            probes.append(replace(probe, absent=("not an image",)))

    def eight() -> dict[str, Any]:
        url = "data:image/png;base64," + base64.b64encode(stripes(5000)).decode()
        parts: list[dict[str, Any]] = [{"type": "text", "text": "look"}]
        parts += [{"type": "image_url", "image_url": {"url": url}}] * 8
        return chat(parts, "vision")

    probes.append(
        Probe("8 images of 25 Mpx/chat.completions", post_json("/v1/chat/completions", eight), 200)
    )
    file_image = [{"role": "user", "content": "look", "images": ["file:///etc/passwd"]}]
    probes.append(
        Probe(
            "file:// image/ollama chat",
            post_json("/api/chat", {"model": "vision", "messages": file_image, "stream": False}),
            400,
            ("messages.0.images.0: the image data is not valid base64",),
            absent=("data: URL",),
        )
    )
    return probes


# ---- 3. audio ------------------------------------------------------------------------------
def flac(seconds: float, rate: int, silent: bool = False) -> bytes:
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    pcm = np.zeros_like(t) if silent else 0.02 * np.sin(2 * np.pi * 220 * t)
    out = io.BytesIO()
    sf.write(out, pcm.astype("float32"), rate, format="FLAC", subtype="PCM_16")
    return out.getvalue()


def transcribe(
    audio: Any, copies: int = 1, **form: str
) -> Callable[[httpx.Client], httpx.Response]:
    """POST ``audio`` (bytes, or a callable making them when sent) ``copies`` times as the
    form's file part."""
    data = {"model": "whisper", "language": "en", **form}

    def send(c: httpx.Client) -> httpx.Response:
        files = [("file", ("a.flac", made(audio), "audio/flac"))] * copies
        return c.post("/v1/audio/transcriptions", files=files, data=data)

    return send


def audio_probes() -> list[Probe]:
    def clip() -> bytes:
        return flac(3.0, 16_000)

    nan = Probe("temperature=nan", transcribe(clip, temperature="nan"), 400, ("finite number",))
    return [
        Probe(
            "bytes libsndfile cannot open",
            transcribe(b"\x00garbage" * 64),
            400,
            ("file: the upload is not audio", "Format not recognised"),
            "file",
            ("<_io", "object at", "0x"),
        ),
        replace(nan, param="temperature", absent=("less than",)),
        Probe("two file parts", transcribe(clip, 2), 400, ("holds 2 of them",), "file"),
        Probe(
            "600 s of 96 kHz silence",
            transcribe(lambda: flac(600.0, 96_000, silent=True)),
            400,
            ("samples per channel", "at most 28800000"),
            "file",
        ),
        Probe("600 s at 48 kHz", transcribe(lambda: flac(600.0, 48_000)), 200),
    ]
